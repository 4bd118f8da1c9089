import CBraid

/// GnuTLS's message for an error code.
package func gnutlsErrorString(_ code: Int32) -> String {
    String(cString: gnutls_strerror(code))
}

/// The RFC 8446 name of an alert ("bad_certificate"), from GnuTLS's table.
package func tlsAlertName(_ code: UInt8) -> String {
    guard let name = gnutls_alert_get_strname(gnutls_alert_description_t(UInt32(code))) else { return "alert \(code)" }
    // GnuTLS names them after its constants ("GNUTLS_A_BAD_CERTIFICATE").
    var text = String(cString: name)
    if text.hasPrefix("GNUTLS_A_") { text.removeFirst("GNUTLS_A_".count) }
    return text.lowercased()
}
