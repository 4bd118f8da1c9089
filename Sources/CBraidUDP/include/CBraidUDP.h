// C helpers for the UDP datapath. Control messages (GSO segment size, ECN, packet info) are
// built and parsed with the CMSG_* macros, which Swift cannot import; `struct in_pktinfo`
// needs _GNU_SOURCE, which the Swift Glibc module does not promise.
#ifndef CBRAID_UDP_H
#define CBRAID_UDP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>

/// Bytes of control buffer enough for every message `braid_udp_build_cmsg` writes and every
/// message the receive path asks for (GRO size, TOS/TCLASS, PKTINFO for v4 and v6).
#define BRAID_UDP_CMSG_CAPACITY 128

/// Writes the control messages for one outgoing message into `buffer` and returns their total
/// length (0: none). `segment_size` > 0 adds UDP_SEGMENT; `ecn` (0-3) > 0 adds IP_TOS or
/// IPV6_TCLASS, whose upper six bits are `dscp` (the socket's own mark, which the message's TOS
/// replaces); `source` (may be NULL) adds IP_PKTINFO / IPV6_PKTINFO so the datagram leaves
/// from that address. `ipv6` selects the family of the socket.
size_t braid_udp_build_cmsg(void *buffer, size_t capacity, int ipv6, uint16_t segment_size,
                            uint8_t ecn, uint8_t dscp, const struct sockaddr *source);

/// UDP socket options (<netinet/udp.h> values; named here for Swift).
#define BRAID_UDP_SEGMENT 103
#define BRAID_UDP_GRO 104

/// Same layout as glibc's `struct mmsghdr`, which needs _GNU_SOURCE.
typedef struct {
  struct msghdr msg_hdr;
  unsigned int msg_len;
} braid_mmsghdr;

/// sendmmsg / recvmmsg (GNU extensions the Swift Glibc module does not show).
int braid_sendmmsg(int fd, braid_mmsghdr *messages, unsigned int count);
int braid_recvmmsg(int fd, braid_mmsghdr *messages, unsigned int count);

/// Metadata read from a received message's control data.
typedef struct {
  int gro_segment_size;            // 0 when the kernel did not coalesce
  uint8_t ecn;                     // low two bits of TOS / TCLASS
  int has_destination;             // 1 when PKTINFO named our address
  struct sockaddr_storage destination;  // our address the datagram was sent to (port 0)
} braid_udp_rx_meta;

void braid_udp_parse_cmsg(const struct msghdr *message, braid_udp_rx_meta *meta);

/// Attaches to `fd`'s SO_REUSEPORT group a classic BPF program that steers each short-header
/// QUIC packet to the socket whose index in the group equals byte `offset` of its destination
/// connection ID. Long-header packets (and tags past the group's size) fall back to the
/// kernel's 4-tuple hash. Returns 0 or -1 with errno.
int braid_attach_connection_id_steering(int fd, uint32_t offset);

// MARK: TCP

/// accept4(fd, ..., SOCK_NONBLOCK | SOCK_CLOEXEC) (a GNU extension the Swift Glibc module does
/// not show): the accepted socket is non-blocking and close-on-exec from its first instant.
/// Fills `address` (may be NULL) and `length`; returns the descriptor or -1 with errno.
int braid_accept4(int fd, struct sockaddr_storage *address, socklen_t *length);

// MARK: epoll (struct epoll_event is packed on x86_64, which Swift does not import reliably)

#define BRAID_EPOLL_IN 0x001
#define BRAID_EPOLL_OUT 0x004
#define BRAID_EPOLL_ERR 0x008
#define BRAID_EPOLL_HUP 0x010

#define BRAID_EPOLL_CTL_ADD 1
#define BRAID_EPOLL_CTL_DEL 2
#define BRAID_EPOLL_CTL_MOD 3

/// epoll_create1(EPOLL_CLOEXEC) and a non-blocking, close-on-exec eventfd.
int braid_epoll_create(void);
int braid_eventfd(void);

/// epoll_ctl with a 64-bit token in place of `epoll_data`.
int braid_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token);

/// Waits up to `timeout_ns` (-1: forever) with nanosecond precision (epoll_pwait2), falling
/// back to millisecond epoll_wait (rounded up) on kernels without it. Fills `tokens` and
/// `events` with up to `max` ready entries; returns their count or -1 with errno.
int braid_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int max, int64_t timeout_ns);

// MARK: heap

/// malloc_trim(0): returns the free memory of every malloc arena to the system (glibc keeps
/// it otherwise). Returns 1 if memory was released.
int braid_malloc_trim(void);


/// The index of the interface a received message arrived on, from its IP_PKTINFO or
/// IPV6_PKTINFO control message (0 when it has none): which link an mDNS message was heard on.
int braid_udp_cmsg_interface(const struct msghdr *message);

/// Sends one datagram out of interface `ifindex` (an IP_PKTINFO / IPV6_PKTINFO control message
/// naming it), as multicast DNS answers on each link separately. Returns sendmsg's result.
long braid_udp_send_on_interface(int fd, int ipv6, const void *bytes, size_t length,
                                 const struct sockaddr *destination, socklen_t destination_length,
                                 int ifindex);

#endif
