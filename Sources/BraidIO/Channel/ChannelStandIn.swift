/// What stands in for a channel's transport while it has none yet (a client still resolving
/// or racing its attempts): released if the channel ends first.
package protocol ChannelStandIn: AnyObject {
    func release(_ context: LoopContext)
}
