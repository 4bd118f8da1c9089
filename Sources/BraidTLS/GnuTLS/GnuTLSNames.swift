import CBraid

/// GnuTLS's message for an error code.
package func gnutlsErrorString(_ code: Int32) -> String {
    String(cString: gnutls_strerror(code))
}

/// The RFC 8446 name of an alert ("bad_certificate"), from GnuTLS's table.
package func tlsAlertName(_ code: UInt8) -> String {
    guard let name = gnutls_alert_get_strname(gnutls_alert_description_t(UInt32(code))) else { return "alert \(code)" }
    return String(cString: name).lowercased()
}
