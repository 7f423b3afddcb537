import CGStreamer
import CVeilGLib
import Foundation
import Synchronization
import VeilCore
import VeilGLib

// Fault drills: packet loss on the real transport, for tests of what the avatar and the voice do on
// a bad network. This machine has no netem, so the impairment sits inside webrtcbin, between libnice
// and DTLS, where every RTP, RTCP and SCTP packet passes. Delay is not offered: GStreamer 1.22's
// `netsim` spliced in after libnice's source delays packets but raises refcount assertions
// (GStreamer-CRITICAL) and broke the receive path in a trial (docs/reliability.md, "Loss").

/// A lossy network path, installed on a `PeerConnection` with `impairNetwork(loss:seed:direction:)`. The loss applies to each packet independently,
/// with a probability that can be changed while the call runs; the draws come from a seeded
/// generator, so one seed drops the same packets of the same sequence. Counts what it saw.
///
/// Thread-safe: the pad probes call `shouldDrop(_:)` on GStreamer's streaming threads; all state
/// is in one mutex.
final class NetworkImpairment: Sendable {
    /// Which packets an impairment acts on, seen from the connection it is installed on.
    enum Direction: Sendable, Equatable {
        /// Packets arriving from the remote peer (after libnice, before DTLS/SRTP).
        case incoming
        /// Packets leaving for the remote peer (after DTLS/SRTP, before libnice).
        case outgoing
        /// Both ways.
        case both

        var incoming: Bool { self != .outgoing }
        var outgoing: Bool { self != .incoming }
    }

    /// Packets seen and dropped so far, per direction.
    struct Counts: Sendable, Equatable {
        /// Incoming packets that reached the impairment.
        var incomingSeen = 0
        /// Incoming packets it dropped.
        var incomingDropped = 0
        /// Outgoing packets that reached the impairment.
        var outgoingSeen = 0
        /// Outgoing packets it dropped.
        var outgoingDropped = 0
    }

    private struct State {
        var loss: Double
        var incoming: SplitMix64
        var outgoing: SplitMix64
        var counts = Counts()
    }

    private let state: Mutex<State>

    /// `loss` is clamped to 0…1 (NaN counts as 0). Incoming and outgoing packets draw from two
    /// generators derived from `seed`, so the pattern one way does not depend on traffic the other.
    init(loss: Double, seed: UInt64) {
        state = Mutex(State(loss: Self.clamped(loss), incoming: SplitMix64(seed: seed),
                            outgoing: SplitMix64(seed: seed ^ 0x5EED_0FA7_B0B5_1DE5)))
    }

    /// The probability with which each packet is dropped now.
    var loss: Double { state.withLock { $0.loss } }

    /// Changes the loss probability from the next packet on (0 lets everything through).
    func setLoss(_ loss: Double) {
        state.withLock { $0.loss = Self.clamped(loss) }
    }

    /// What the impairment has seen and dropped so far.
    var counts: Counts { state.withLock { $0.counts } }

    /// One packet, arriving (`incoming`) or leaving: counts it and says whether to drop it.
    func shouldDrop(incoming: Bool) -> Bool {
        state.withLock { state in
            // A 53-bit uniform draw in [0, 1), as Double's random(in:) would make.
            let draw: Double
            if incoming {
                draw = Double(state.incoming.next() >> 11) / Double(1 << 53)
            } else {
                draw = Double(state.outgoing.next() >> 11) / Double(1 << 53)
            }
            let drop = draw < state.loss
            if incoming {
                state.counts.incomingSeen += 1
                if drop { state.counts.incomingDropped += 1 }
            } else {
                state.counts.outgoingSeen += 1
                if drop { state.counts.outgoingDropped += 1 }
            }
            return drop
        }
    }

    private static func clamped(_ loss: Double) -> Double {
        loss.isNaN ? 0 : min(max(loss, 0), 1)
    }
}

extension PeerConnection {
    /// Makes the network path to the remote peer lossy from now on: each packet in `direction`
    /// (RTP, RTCP, DTLS, SCTP alike) is dropped with probability `loss`, drawn from a generator
    /// seeded with `seed`. For fault drills and tests of concealment. Returns the impairment (to
    /// read its counts or change the loss), or nil when the connection has no transport yet
    /// (install it once ICE has connected). Each call adds another impairment on top of earlier ones.
    func impairNetwork(loss: Double, seed: UInt64, direction: NetworkImpairment.Direction = .incoming) -> NetworkImpairment? {
        let impairment = NetworkImpairment(loss: loss, seed: seed)
        let installed = (try? loop.sync { [graph] () -> Bool in
            guard graph.liveWebrtcbin != nil else { return false }
            return graph.impair(with: impairment, direction: direction) > 0
        }) ?? false
        return installed ? impairment : nil
    }
}

extension PeerGraph {
    /// On the loop: adds `impairment`'s probes to the transport (libnice's source and sink pads).
    /// Returns how many transport elements were impaired (0 before ICE has started).
    func impair(with impairment: NetworkImpairment, direction: NetworkImpairment.Direction) -> Int {
        var impaired = 0
        forEachElement { element in
            let incoming: Bool
            switch factoryName(element) {
            case "nicesrc" where direction.incoming: incoming = true
            case "nicesink" where direction.outgoing: incoming = false
            default: return
            }
            guard let pad = gst_element_get_static_pad(element, incoming ? "src" : "sink") else { return }
            defer { gst_object_unref(gpointerOf(pad)) }
            addLossProbe(pad, impairment: impairment, incoming: incoming)
            impaired += 1
        }
        return impaired
    }

    /// A probe that drops each buffer (and each buffer of a list) the impairment picks.
    private func addLossProbe(_ pad: UnsafeMutablePointer<GstPad>, impairment: NetworkImpairment, incoming: Bool) {
        let mask = GstPadProbeType(GST_PAD_PROBE_TYPE_BUFFER.rawValue | GST_PAD_PROBE_TYPE_BUFFER_LIST.rawValue)
        addProbe(pad, mask) { _, info in
            if info.pointee.type.rawValue & GST_PAD_PROBE_TYPE_BUFFER.rawValue != 0 {
                return impairment.shouldDrop(incoming: incoming) ? GST_PAD_PROBE_DROP : GST_PAD_PROBE_OK
            }
            guard let list = gst_pad_probe_info_get_buffer_list(info) else { return GST_PAD_PROBE_OK }
            // A list is several packets: keep those not picked, in a new list that replaces it.
            let count = gst_buffer_list_length(list)
            var kept: [UnsafeMutablePointer<GstBuffer>] = []
            for index in 0..<count {
                if let buffer = gst_buffer_list_get(list, index), !impairment.shouldDrop(incoming: incoming) {
                    kept.append(buffer)
                }
            }
            if kept.count == Int(count) { return GST_PAD_PROBE_OK }
            if kept.isEmpty { return GST_PAD_PROBE_DROP }
            guard let replacement = gst_buffer_list_new_sized(UInt32(kept.count)) else { return GST_PAD_PROBE_DROP }
            for buffer in kept { gst_buffer_list_insert(replacement, -1, gst_buffer_ref(buffer)) }
            gst_mini_object_unref(UnsafeMutableRawPointer(list).assumingMemoryBound(to: GstMiniObject.self))
            info.pointee.data = UnsafeMutableRawPointer(replacement)
            return GST_PAD_PROBE_OK
        }
    }
}
