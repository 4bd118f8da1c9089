import Foundation

/// QUIC's received RFC 9221 datagrams.
package typealias DatagramInbox = MessageInbox<Data>
/// An iterator's share of a `DatagramInbox`.
package typealias DatagramBatch = MessageBatch<Data>
