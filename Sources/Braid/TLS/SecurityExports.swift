// Apple's Network module brings the Security names its TLS options speak (sec_trust_t,
// SecTrust, SecCertificate, SecKey) along; `import Braid` does the same.
@_exported import BraidSecurity
