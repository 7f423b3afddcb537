import VeilCore
import VeilInterop

/// What a sender following the VMC protocol sends per frame for a face, as `veil bench` weighs it
/// against an ExpressionFrame: one bundle with the time, the head and eye bones, every blendshape
/// and an apply (the messages of `VMCEncoder` without its status and root, which a face does not
/// need every frame; and in one bundle, as a sender unconcerned with the MTU sends it).
///
/// That is the same information an `ExpressionFrame` carries.
enum VMCFrame {
    /// The bundle for `expression` at `timeSeconds`, stamped with `timeTag`.
    static func bundle(for expression: VeilCore.Expression, timeSeconds: Double,
                       timeTag: OSCTimeTag = .immediately) -> OSCBundle {
        let messages = VMCEncoder().messages(for: ExpressionUpdate(expression, time: timeSeconds))
            .filter { $0.address != VMC.Address.ok && $0.address != VMC.Address.root }
        return OSCBundle(timeTag: timeTag, elements: messages.map { .message($0) })
    }
}
