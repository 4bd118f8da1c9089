#define _GNU_SOURCE
#include "CBraidUDP.h"

#include <string.h>
#include <netinet/udp.h>
#include <errno.h>
#include <linux/filter.h>
#include <malloc.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT BRAID_UDP_SEGMENT
#endif
#ifndef UDP_GRO
#define UDP_GRO BRAID_UDP_GRO
#endif

_Static_assert(sizeof(braid_mmsghdr) == sizeof(struct mmsghdr), "mmsghdr layout");
_Static_assert(UDP_SEGMENT == BRAID_UDP_SEGMENT && UDP_GRO == BRAID_UDP_GRO, "UDP option values");

int braid_sendmmsg(int fd, braid_mmsghdr *messages, unsigned int count) {
  return sendmmsg(fd, (struct mmsghdr *)messages, count, 0);
}

int braid_recvmmsg(int fd, braid_mmsghdr *messages, unsigned int count) {
  return recvmmsg(fd, (struct mmsghdr *)messages, count, 0, NULL);
}

/// The next control-message slot for `payload` bytes, or NULL when the buffer is full.
static struct cmsghdr *slot(void *buffer, size_t capacity, size_t used, size_t payload) {
  if (used + CMSG_SPACE(payload) > capacity) {
    return NULL;
  }
  return (struct cmsghdr *)((char *)buffer + used);
}

static size_t put(struct cmsghdr *cm, int level, int type, const void *data, size_t length) {
  cm->cmsg_level = level;
  cm->cmsg_type = type;
  cm->cmsg_len = CMSG_LEN(length);
  memcpy(CMSG_DATA(cm), data, length);
  return CMSG_SPACE(length);
}

size_t braid_udp_build_cmsg(void *buffer, size_t capacity, int ipv6, uint16_t segment_size,
                            uint8_t ecn, uint8_t dscp, const struct sockaddr *source) {
  size_t used = 0;
  struct cmsghdr *cm;
  if (segment_size > 0 && (cm = slot(buffer, capacity, used, sizeof(uint16_t))) != NULL) {
    used += put(cm, SOL_UDP, UDP_SEGMENT, &segment_size, sizeof(uint16_t));
  }
  if (ecn != 0 && (cm = slot(buffer, capacity, used, sizeof(int))) != NULL) {
    // The message's TOS replaces the socket's whole byte: the service class's DSCP goes with it.
    int tos = (dscp << 2) | (ecn & 0x3);
    used += put(cm, ipv6 ? IPPROTO_IPV6 : IPPROTO_IP, ipv6 ? IPV6_TCLASS : IP_TOS, &tos, sizeof(int));
  }
  if (source != NULL && ipv6 && source->sa_family == AF_INET6 &&
      (cm = slot(buffer, capacity, used, sizeof(struct in6_pktinfo))) != NULL) {
    struct in6_pktinfo info;
    memset(&info, 0, sizeof(info));
    info.ipi6_addr = ((const struct sockaddr_in6 *)source)->sin6_addr;
    used += put(cm, IPPROTO_IPV6, IPV6_PKTINFO, &info, sizeof(info));
  } else if (source != NULL && !ipv6 && source->sa_family == AF_INET &&
             (cm = slot(buffer, capacity, used, sizeof(struct in_pktinfo))) != NULL) {
    struct in_pktinfo info;
    memset(&info, 0, sizeof(info));
    info.ipi_spec_dst = ((const struct sockaddr_in *)source)->sin_addr;
    used += put(cm, IPPROTO_IP, IP_PKTINFO, &info, sizeof(info));
  }
  return used;
}

void braid_udp_parse_cmsg(const struct msghdr *message, braid_udp_rx_meta *meta) {
  memset(meta, 0, sizeof(*meta));
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(message); cm != NULL;
       cm = CMSG_NXTHDR((struct msghdr *)message, cm)) {
    if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
      int size = 0;
      memcpy(&size, CMSG_DATA(cm), sizeof(int));
      meta->gro_segment_size = size;
    } else if ((cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS) ||
               (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_TCLASS)) {
      // IP_TOS arrives as one byte, IPV6_TCLASS as an int.
      unsigned char first = *CMSG_DATA(cm);
      int value = first;
      if (cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
        memcpy(&value, CMSG_DATA(cm), sizeof(int));
      }
      meta->ecn = (uint8_t)(value & 0x3);
    } else if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
      struct in_pktinfo info;
      memcpy(&info, CMSG_DATA(cm), sizeof(info));
      struct sockaddr_in *sin = (struct sockaddr_in *)&meta->destination;
      memset(&meta->destination, 0, sizeof(meta->destination));
      sin->sin_family = AF_INET;
      sin->sin_addr = info.ipi_addr;
      meta->has_destination = 1;
    } else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
      struct in6_pktinfo info;
      memcpy(&info, CMSG_DATA(cm), sizeof(info));
      struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&meta->destination;
      memset(&meta->destination, 0, sizeof(meta->destination));
      sin6->sin6_family = AF_INET6;
      sin6->sin6_addr = info.ipi6_addr;
      meta->has_destination = 1;
    }
  }
}

#include <sys/eventfd.h>

_Static_assert(EPOLL_CTL_ADD == BRAID_EPOLL_CTL_ADD && EPOLL_CTL_DEL == BRAID_EPOLL_CTL_DEL &&
                   EPOLL_CTL_MOD == BRAID_EPOLL_CTL_MOD && EPOLLIN == BRAID_EPOLL_IN &&
                   EPOLLOUT == BRAID_EPOLL_OUT && EPOLLERR == BRAID_EPOLL_ERR && EPOLLHUP == BRAID_EPOLL_HUP,
               "epoll constants");

int braid_accept4(int fd, struct sockaddr_storage *address, socklen_t *length) {
  return accept4(fd, (struct sockaddr *)address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int braid_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int braid_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int braid_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
  struct epoll_event event;
  memset(&event, 0, sizeof(event));
  event.events = events;
  event.data.u64 = token;
  return epoll_ctl(epfd, op, fd, &event);
}

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

int braid_attach_connection_id_steering(int fd, uint32_t offset) {
  // The kernel runs the program with the UDP payload at offset 0. An index at or past the
  // group's size makes it fall back to the 4-tuple hash, which is what long headers want:
  // their destination ID is the client's choice until the handshake completes.
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),            // first byte
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x80, 2, 0),  // long header -> hash
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 1 + offset),   // the tag byte of the destination ID
      BPF_STMT(BPF_RET | BPF_A, 0),
      BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
  };
  struct sock_fprog program = {.len = sizeof(code) / sizeof(code[0]), .filter = code};
  return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &program, sizeof(program));
}

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441
#endif

int braid_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int max, int64_t timeout_ns) {
  static _Atomic int have_pwait2 = 1;
  struct epoll_event ready[64];
  if (max > 64) {
    max = 64;
  }
  int count = -1;
  if (have_pwait2) {
    struct timespec timeout = {timeout_ns / 1000000000, timeout_ns % 1000000000};
    count = (int)syscall(SYS_epoll_pwait2, epfd, ready, max, timeout_ns < 0 ? NULL : &timeout, NULL, 0);
    if (count < 0 && errno == ENOSYS) {
      have_pwait2 = 0;
    }
  }
  if (!have_pwait2) {
    int millis = timeout_ns < 0 ? -1 : (int)((timeout_ns + 999999) / 1000000);
    count = epoll_wait(epfd, ready, max, millis);
  }
  for (int i = 0; i < count; i++) {
    tokens[i] = ready[i].data.u64;
    events[i] = ready[i].events;
  }
  return count;
}

int braid_malloc_trim(void) {
    return malloc_trim(0);
}

int braid_udp_cmsg_interface(const struct msghdr *message) {
  for (struct cmsghdr *cm = CMSG_FIRSTHDR((struct msghdr *)message); cm != NULL;
       cm = CMSG_NXTHDR((struct msghdr *)message, cm)) {
    if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
      struct in_pktinfo info;
      memcpy(&info, CMSG_DATA(cm), sizeof(info));
      return info.ipi_ifindex;
    }
    if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
      struct in6_pktinfo info;
      memcpy(&info, CMSG_DATA(cm), sizeof(info));
      return (int)info.ipi6_ifindex;
    }
  }
  return 0;
}

long braid_udp_send_on_interface(int fd, int ipv6, const void *bytes, size_t length,
                                 const struct sockaddr *destination, socklen_t destination_length,
                                 int ifindex) {
  union {
    char buffer[CMSG_SPACE(sizeof(struct in6_pktinfo))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct iovec iov = {.iov_base = (void *)bytes, .iov_len = length};
  struct msghdr message = {0};
  message.msg_name = (void *)destination;
  message.msg_namelen = destination_length;
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control.buffer;
  struct cmsghdr *cm = (struct cmsghdr *)control.buffer;
  if (ipv6) {
    struct in6_pktinfo info;
    memset(&info, 0, sizeof(info));
    info.ipi6_ifindex = (unsigned)ifindex;
    cm->cmsg_level = IPPROTO_IPV6;
    cm->cmsg_type = IPV6_PKTINFO;
    cm->cmsg_len = CMSG_LEN(sizeof(info));
    memcpy(CMSG_DATA(cm), &info, sizeof(info));
    message.msg_controllen = CMSG_SPACE(sizeof(info));
  } else {
    struct in_pktinfo info;
    memset(&info, 0, sizeof(info));
    info.ipi_ifindex = ifindex;
    cm->cmsg_level = IPPROTO_IP;
    cm->cmsg_type = IP_PKTINFO;
    cm->cmsg_len = CMSG_LEN(sizeof(info));
    memcpy(CMSG_DATA(cm), &info, sizeof(info));
    message.msg_controllen = CMSG_SPACE(sizeof(info));
  }
  return (long)sendmsg(fd, &message, 0);
}
