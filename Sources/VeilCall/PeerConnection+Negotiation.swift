import CGStreamer
import CVeilGLib
import CVeilWebRTC
import Foundation
import VeilCore
import VeilGLib

// Offer/answer, remote candidates and the connection state.
extension PeerConnection {
    func createOffer() {
        guard graph.liveWebrtcbin != nil, !graph.offerInFlight,
              veil_object_get_int(gpointerOf(graph.webrtcbin), "signaling-state") == Int32(GST_WEBRTC_SIGNALING_STATE_STABLE.rawValue)
        else { return }
        graph.offerInFlight = true
        let promise = makePromise { [weak self] promise in self?.descriptionCreated(promise, type: .offer) }
        veil_webrtc_create_offer(graph.webrtcbin, promise)
        gst_promise_unref(promise)
    }

    func createAnswer() {
        guard graph.liveWebrtcbin != nil else { return }
        let promise = makePromise { [weak self] promise in self?.descriptionCreated(promise, type: .answer) }
        veil_webrtc_create_answer(graph.webrtcbin, promise)
        gst_promise_unref(promise)
    }

    /// On a webrtcbin thread: the offer or answer webrtcbin created.
    func descriptionCreated(_ promise: UnsafeMutablePointer<GstPromise>, type: SessionDescription.Kind) {
        let result = reply(of: promise)
        if let message = replyError(result) {
            return fail(PeerError(.negotiationFailed, "webrtcbin could not create the \(type.rawValue): \(message)"), fatal: true)
        }
        guard let result, let value = gst_structure_get_value(result, type.rawValue), let boxed = g_value_get_boxed(value) else {
            return fail(PeerError(.negotiationFailed, "webrtcbin returned no \(type.rawValue)"), fatal: true)
        }
        let description = boxed.assumingMemoryBound(to: GstWebRTCSessionDescription.self)
        // With the connection's own certificate's fingerprint (see `DTLSCertificate`): what the
        // peer checks the handshake against. webrtcbin never reads its own back.
        guard let sdp = takeString(gst_sdp_message_as_text(description.pointee.sdp)).map({ graph.certificate?.describing($0) ?? $0 }),
              let copy = gst_webrtc_session_description_copy(description) else {
            return fail(PeerError(.negotiationFailed, "webrtcbin's \(type.rawValue) could not be read"), fatal: true)
        }
        let owned = OwnedDescription(copy)
        onLoop { $0.applyLocalDescription(owned, type: type, sdp: sdp) }
    }

    func applyLocalDescription(_ description: OwnedDescription, type: SessionDescription.Kind, sdp: String) {
        guard graph.liveWebrtcbin != nil else { return }
        do {
            try SessionDescriptionPolicy.validate(sdp, requireBoth: type == .offer)
        } catch {
            // Never let a description with anything but audio and the expression channel leave.
            return fail(error as? PeerError ?? PeerError(.privacyViolation, "\(error)"), fatal: true)
        }
        // Yielded before applying it, so that it precedes every candidate gathering then produces.
        signalingSink.yield(.description(SessionDescription(type: type, sdp: sdp)))
        let promise = makePromise { [weak self] promise in
            if let message = replyError(reply(of: promise)) {
                self?.fail(PeerError(.negotiationFailed, "webrtcbin refused its own \(type.rawValue): \(message)"), fatal: true)
            }
        }
        veil_webrtc_set_local_description(graph.webrtcbin, description.pointer, promise)
        gst_promise_unref(promise)
    }

    func applyRemoteDescription(_ description: OwnedDescription, type: SessionDescription.Kind) {
        guard graph.liveWebrtcbin != nil else { return }
        let promise = makePromise { [weak self] promise in
            let error = replyError(reply(of: promise))
            self?.onLoop { $0.remoteDescriptionApplied(type: type, error: error) }
        }
        veil_webrtc_set_remote_description(graph.webrtcbin, description.pointer, promise)
        gst_promise_unref(promise)
    }

    func remoteDescriptionApplied(type: SessionDescription.Kind, error: String?) {
        guard graph.liveWebrtcbin != nil else { return }
        if let error {
            return fail(PeerError(.negotiationFailed, "webrtcbin refused the remote \(type.rawValue): \(error)"), fatal: true)
        }
        graph.remoteDescriptionSet = true
        for candidate in graph.pendingCandidates {
            veil_webrtc_add_ice_candidate(graph.webrtcbin, candidate.mline, candidate.candidate)
        }
        graph.pendingCandidates.removeAll()
        switch type {
        case .offer: createAnswer()
        case .answer: graph.offerInFlight = false
        }
    }

    func applyRemoteCandidate(_ candidate: ICECandidate) {
        guard graph.liveWebrtcbin != nil else { return }
        if graph.remoteDescriptionSet {
            veil_webrtc_add_ice_candidate(graph.webrtcbin, candidate.mline, candidate.candidate)
        } else if graph.pendingCandidates.count < 64 {
            graph.pendingCandidates.append(candidate)
        }
    }

    // MARK: - State

    func update(_ state: State) {
        let changed = shared.withLock { shared -> Bool in
            guard shared.state != state, shared.state != .closed, !(shared.closing && state != .closed) else { return false }
            shared.state = state
            if state == .connected, shared.connectedMicros == nil { shared.connectedMicros = UInt64(g_get_monotonic_time()) }
            return true
        }
        guard changed else { return }
        eventSink.yield(.connectionState(state))
        if state == .connected { onLoop { $0.startFileInput() } }
    }

    func fail(_ error: PeerError, fatal: Bool) {
        eventSink.yield(.failure(error))
        if fatal { update(.failed) }
    }
}
