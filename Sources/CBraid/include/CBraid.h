// C shims that let Swift use ngtcp2 0.12.1, ngtcp2_crypto_gnutls, GnuTLS 3.7 and nghttp3 0.8.
//
// Swift cannot see function-like macros, call variadic callbacks, or touch C global function
// pointers under strict concurrency; each wrapper below exists for one of those reasons.
#ifndef CBRAID_H
#define CBRAID_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <gnutls/abstract.h>
#include <gnutls/pkcs12.h>
#include <gnutls/dtls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <nghttp3/nghttp3.h>
#include <zlib.h>

// MARK: ngtcp2 versioned-function wrappers (struct versions come from the headers compiled against)

static inline int braid_ngtcp2_conn_client_new(
    ngtcp2_conn **pconn, const ngtcp2_cid *dcid, const ngtcp2_cid *scid,
    const ngtcp2_path *path, uint32_t version, const ngtcp2_callbacks *callbacks,
    const ngtcp2_settings *settings, const ngtcp2_transport_params *params,
    void *user_data) {
  return ngtcp2_conn_client_new(pconn, dcid, scid, path, version, callbacks, settings,
                                params, NULL, user_data);
}

static inline int braid_ngtcp2_conn_server_new(
    ngtcp2_conn **pconn, const ngtcp2_cid *dcid, const ngtcp2_cid *scid,
    const ngtcp2_path *path, uint32_t version, const ngtcp2_callbacks *callbacks,
    const ngtcp2_settings *settings, const ngtcp2_transport_params *params,
    void *user_data) {
  return ngtcp2_conn_server_new(pconn, dcid, scid, path, version, callbacks, settings,
                                params, NULL, user_data);
}

static inline int braid_ngtcp2_conn_read_pkt(ngtcp2_conn *conn, const ngtcp2_path *path,
                                             const ngtcp2_pkt_info *pi, const uint8_t *pkt,
                                             size_t pktlen, ngtcp2_tstamp ts) {
  return ngtcp2_conn_read_pkt(conn, path, pi, pkt, pktlen, ts);
}

static inline ngtcp2_ssize braid_ngtcp2_conn_write_pkt(ngtcp2_conn *conn, ngtcp2_path *path,
                                                       ngtcp2_pkt_info *pi, uint8_t *dest,
                                                       size_t destlen, ngtcp2_tstamp ts) {
  return ngtcp2_conn_write_pkt(conn, path, pi, dest, destlen, ts);
}

static inline ngtcp2_ssize braid_ngtcp2_conn_writev_stream(
    ngtcp2_conn *conn, ngtcp2_path *path, ngtcp2_pkt_info *pi, uint8_t *dest, size_t destlen,
    ngtcp2_ssize *pdatalen, uint32_t flags, int64_t stream_id, const ngtcp2_vec *datav,
    size_t datavcnt, ngtcp2_tstamp ts) {
  return ngtcp2_conn_writev_stream(conn, path, pi, dest, destlen, pdatalen, flags, stream_id,
                                   datav, datavcnt, ts);
}

static inline ngtcp2_ssize braid_ngtcp2_conn_writev_datagram(
    ngtcp2_conn *conn, ngtcp2_path *path, ngtcp2_pkt_info *pi, uint8_t *dest, size_t destlen,
    int *paccepted, uint32_t flags, uint64_t dgram_id, const ngtcp2_vec *datav,
    size_t datavcnt, ngtcp2_tstamp ts) {
  return ngtcp2_conn_writev_datagram(conn, path, pi, dest, destlen, paccepted, flags, dgram_id,
                                     datav, datavcnt, ts);
}

static inline ngtcp2_ssize braid_ngtcp2_conn_write_connection_close(
    ngtcp2_conn *conn, ngtcp2_path *path, ngtcp2_pkt_info *pi, uint8_t *dest, size_t destlen,
    const ngtcp2_connection_close_error *ccerr, ngtcp2_tstamp ts) {
  return ngtcp2_conn_write_connection_close(conn, path, pi, dest, destlen, ccerr, ts);
}

static inline ngtcp2_ssize braid_ngtcp2_encode_transport_params(
    uint8_t *dest, size_t destlen, ngtcp2_transport_params_type exttype,
    const ngtcp2_transport_params *params) {
  return ngtcp2_encode_transport_params(dest, destlen, exttype, params);
}

static inline int braid_ngtcp2_decode_transport_params(ngtcp2_transport_params *params,
                                                       ngtcp2_transport_params_type exttype,
                                                       const uint8_t *data, size_t datalen) {
  return ngtcp2_decode_transport_params(params, exttype, data, datalen);
}

static inline void braid_ngtcp2_conn_set_early_remote_transport_params(
    ngtcp2_conn *conn, const ngtcp2_transport_params *params) {
  ngtcp2_conn_set_early_remote_transport_params(conn, params);
}

static inline int braid_ngtcp2_conn_set_local_transport_params(
    ngtcp2_conn *conn, const ngtcp2_transport_params *params) {
  return ngtcp2_conn_set_local_transport_params(conn, params);
}

static inline void braid_ngtcp2_transport_params_default(ngtcp2_transport_params *params) {
  ngtcp2_transport_params_default(params);
}

static inline void braid_ngtcp2_settings_default(ngtcp2_settings *settings) {
  ngtcp2_settings_default(settings);
}

static inline void braid_ngtcp2_conn_get_conn_stat(ngtcp2_conn *conn, ngtcp2_conn_stat *cstat) {
  ngtcp2_conn_get_conn_stat(conn, cstat);
}

// MARK: nghttp3 versioned-function wrappers (struct versions come from the headers compiled against)

static inline void braid_nghttp3_settings_default(nghttp3_settings *settings) {
  nghttp3_settings_default(settings);
}

static inline int braid_nghttp3_conn_client_new(nghttp3_conn **pconn,
                                                const nghttp3_callbacks *callbacks,
                                                const nghttp3_settings *settings,
                                                void *user_data) {
  return nghttp3_conn_client_new(pconn, callbacks, settings, NULL, user_data);
}

static inline int braid_nghttp3_conn_server_new(nghttp3_conn **pconn,
                                                const nghttp3_callbacks *callbacks,
                                                const nghttp3_settings *settings,
                                                void *user_data) {
  return nghttp3_conn_server_new(pconn, callbacks, settings, NULL, user_data);
}

// MARK: ngtcp2_crypto sizes defined with sizeof expressions (not importable as constants)

static inline size_t braid_ngtcp2_crypto_max_retry_tokenlen(void) {
  return NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN;
}

static inline size_t braid_ngtcp2_crypto_max_regular_tokenlen(void) {
  return NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN;
}

// MARK: logging

/// A non-variadic sink for ngtcp2's printf-style log callback: `user_data` is the
/// `ngtcp2_conn` user data; `line` is one formatted line without a trailing newline.
typedef void (*braid_log_sink)(void *user_data, const char *line);

/// Registers the process-wide sink used by `braid_ngtcp2_log_printf`.
void braid_set_ngtcp2_log_sink(braid_log_sink sink);

/// Matches `ngtcp2_printf`: formats with vsnprintf and forwards to the registered sink.
void braid_ngtcp2_log_printf(void *user_data, const char *format, ...);

/// Routes ngtcp2's debug log through `braid_ngtcp2_log_printf` (Swift cannot name a variadic
/// function pointer).
static inline void braid_ngtcp2_settings_enable_log(ngtcp2_settings *settings) {
  settings->log_printf = braid_ngtcp2_log_printf;
}

// MARK: GnuTLS global function pointers

static inline void braid_gnutls_free(void *ptr) { gnutls_free(ptr); }

// MARK: zlib (WebSocket permessage-deflate)

/// `deflateInit2` and `inflateInit2` are macros (they pass the library's version and the
/// stream's size); these are their callable forms. Negative window bits: raw deflate.
static inline int braid_deflate_init2(z_stream *stream, int level, int window_bits, int memory_level) {
  return deflateInit2(stream, level, Z_DEFLATED, window_bits, memory_level, Z_DEFAULT_STRATEGY);
}

static inline int braid_inflate_init2(z_stream *stream, int window_bits) {
  return inflateInit2(stream, window_bits);
}

#endif
