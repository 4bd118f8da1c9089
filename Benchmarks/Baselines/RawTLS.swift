// GnuTLS over a connected, blocking TCP socket for the raw baselines: TLS 1.3 only, no tickets,
// and the key exchange Braid's ends use (X25519 first, one key share from the client), so the
// rows compare the same handshake.
import BraidTLS
import CBraid

extension RawBaselines {
    enum TLS {
        static let priority = "NORMAL:-VERS-ALL:+VERS-TLS1.3:" + TLSKeyExchange.tlsGroups

        static func message(_ code: Int32) -> String {
            "\(String(cString: gnutls_strerror(code))) (\(code))"
        }

        /// Throws unless `code` is GNUTLS_E_SUCCESS (or, with `allowPositive`, a count).
        static func check(_ code: Int32, _ call: @autoclosure () -> String, allowPositive: Bool = false) throws {
            if code < 0 || (code > 0 && !allowPositive) { throw Failure("\(call()): \(message(code))") }
        }

        /// Certificate credentials: a server's chain and key, or a client's trusted CAs.
        final class Credentials {
            let handle: gnutls_certificate_credentials_t

            private init() throws {
                var created: gnutls_certificate_credentials_t?
                try check(gnutls_certificate_allocate_credentials(&created), "gnutls_certificate_allocate_credentials")
                guard let created else { throw Failure("gnutls_certificate_allocate_credentials returned no credentials") }
                handle = created
            }

            deinit { gnutls_certificate_free_credentials(handle) }

            static func server(certificate: String, key: String) throws -> Credentials {
                let credentials = try Credentials()
                try check(
                    gnutls_certificate_set_x509_key_file(credentials.handle, certificate, key, GNUTLS_X509_FMT_PEM),
                    "loading certificate \(certificate) with key \(key)")
                return credentials
            }

            static func client(trusting caFile: String) throws -> Credentials {
                let credentials = try Credentials()
                let loaded = gnutls_certificate_set_x509_trust_file(credentials.handle, caFile, GNUTLS_X509_FMT_PEM)
                try check(loaded, "loading trusted CAs from \(caFile)", allowPositive: true)
                guard loaded > 0 else { throw Failure("no CA certificate found in \(caFile)") }
                return credentials
            }
        }

        /// One TLS session on a socket this session does not own (the caller closes it).
        final class Session {
            let handle: gnutls_session_t

            private init(flags: UInt32, credentials: Credentials, socket fd: Int32) throws {
                var created: gnutls_session_t?
                try check(gnutls_init(&created, flags | GNUTLS_NO_TICKETS.rawValue), "gnutls_init")
                guard let created else { throw Failure("gnutls_init returned no session") }
                handle = created
                var errorPosition: UnsafePointer<CChar>?
                let rc = gnutls_priority_set_direct(handle, priority, &errorPosition)
                if rc < 0 {
                    let at = errorPosition.map { " at \(String(cString: $0).debugDescription)" } ?? ""
                    throw Failure("gnutls_priority_set_direct \(priority.debugDescription)\(at): \(message(rc))")
                }
                try check(
                    gnutls_credentials_set(handle, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials.handle)),
                    "gnutls_credentials_set")
                // gnutls_transport_set_int is a macro for this.
                gnutls_transport_set_int2(handle, fd, fd)
            }

            deinit { gnutls_deinit(handle) }

            static func server(_ credentials: Credentials, socket fd: Int32) throws -> Session {
                try Session(flags: GNUTLS_SERVER.rawValue, credentials: credentials, socket: fd)
            }

            /// A client session that sends `serverName` as SNI and verifies the certificate against it.
            static func client(_ credentials: Credentials, serverName: String, socket fd: Int32) throws -> Session {
                let session = try Session(flags: GNUTLS_CLIENT.rawValue | TLSKeyExchange.clientSessionFlags, credentials: credentials, socket: fd)
                try check(
                    gnutls_server_name_set(session.handle, GNUTLS_NAME_DNS, serverName, serverName.utf8.count),
                    "gnutls_server_name_set \(serverName)")
                gnutls_session_set_verify_cert(session.handle, serverName, 0)
                return session
            }

            func handshake() throws {
                var rc: Int32
                repeat {
                    rc = gnutls_handshake(handle)
                } while rc < 0 && gnutls_error_is_fatal(rc) == 0
                guard rc < 0 else { return }
                var detail = ""
                if rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR {
                    let status = gnutls_session_get_verify_cert_status(handle)
                    var printed = gnutls_datum_t()
                    if gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &printed, 0) == 0,
                        let data = printed.data
                    {
                        detail = ": " + String(cString: UnsafeRawPointer(data).assumingMemoryBound(to: CChar.self))
                        braid_gnutls_free(printed.data)  // gnutls_free is a C global function pointer
                    }
                }
                throw Failure("TLS handshake: \(message(rc))\(detail)")
            }

            /// Sends all `count` bytes, one record (one send call) at a time; returns the number of records.
            func sendAll(_ bytes: UnsafeRawPointer, _ count: Int) throws -> Int {
                var offset = 0
                var records = 0
                while offset < count {
                    let sent = gnutls_record_send(handle, bytes + offset, count - offset)
                    if sent < 0 {
                        let code = Int32(sent)
                        if code == GNUTLS_E_AGAIN || code == GNUTLS_E_INTERRUPTED { continue }
                        throw Failure("gnutls_record_send: \(message(code))")
                    }
                    records += 1
                    offset += sent
                }
                return records
            }

            /// One record's plaintext; nil at close_notify. A TCP close without close_notify is an error
            /// unless `closeIsEnd`.
            func receive(_ buffer: UnsafeMutableRawPointer, _ capacity: Int, closeIsEnd: Bool = false) throws -> Int? {
                while true {
                    let received = gnutls_record_recv(handle, buffer, capacity)
                    if received > 0 { return received }
                    if received == 0 { return nil }
                    let code = Int32(received)
                    if code == GNUTLS_E_AGAIN || code == GNUTLS_E_INTERRUPTED { continue }
                    if code == GNUTLS_E_PREMATURE_TERMINATION && closeIsEnd { return nil }
                    throw Failure("gnutls_record_recv: \(message(code))")
                }
            }

            /// Sends close_notify (our direction only).
            func bye() throws {
                var rc: Int32
                repeat {
                    rc = gnutls_bye(handle, GNUTLS_SHUT_WR)
                } while rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED
                try check(rc, "gnutls_bye")
            }
        }
    }
}
