import CGStreamer
import CVeilGLib
import Foundation

// Audio output switching: the sound server's sinks, and moving a live PulseAudio output between them.
extension PeerConnection {
    /// The sound server's sinks (PulseAudio, or PipeWire's PulseAudio server), sorted by name:
    /// where received voices can play. Empty when no sound server runs. Found through GStreamer's
    /// device monitor (class "Audio/Sink"), not a subprocess. Ports of a sink (speaker and
    /// headphone jacks of one card) are not listed: the sound server switches those by itself.
    ///
    /// Blocks for the few milliseconds it takes to ask the sound server: call it from a thread of
    /// your own (a UI or render thread), not from async code on the cooperative pool.
    public static func audioOutputDevices() throws -> [AudioDevice] {
        try CallGStreamer.initialize()
        guard let monitor = gst_device_monitor_new() else { return [] }
        defer { gst_object_unref(gpointerOf(monitor)) }
        _ = gst_device_monitor_add_filter(monitor, "Audio/Sink", nil)
        // On PipeWire, its own provider hides PulseAudio's; the sinks are PulseAudio's all the same
        // (pulsesink plays through pipewire-pulse), so show every provider and keep PulseAudio's.
        gst_device_monitor_set_show_all_devices(monitor, 1)
        // Started rather than probed: only a started PulseAudio provider knows the default sink.
        guard gst_device_monitor_start(monitor) != 0 else { return [] }
        defer { gst_device_monitor_stop(monitor) }
        let list = gst_device_monitor_get_devices(monitor)
        defer { g_list_free_full(list) { if let device = $0 { gst_object_unref(device) } } }
        var devices: [AudioDevice] = []
        var node = list
        while let current = node {
            node = current.pointee.next
            if let data = current.pointee.data, let device = pulseDevice(data.assumingMemoryBound(to: GstDevice.self)) {
                devices.append(device)
            }
        }
        return devices.sorted { $0.name < $1.name }
    }

    /// A GstDevice as an `AudioDevice` if it is a PulseAudio sink (it has PulseAudio's
    /// "internal-name", the sink name pulsesink's `device` takes).
    private static func pulseDevice(_ device: UnsafeMutablePointer<GstDevice>) -> AudioDevice? {
        let instance = UnsafeMutableRawPointer(device).assumingMemoryBound(to: GTypeInstance.self)
        guard let typeClass = instance.pointee.g_class,
              g_object_class_find_property(UnsafeMutableRawPointer(typeClass).assumingMemoryBound(to: GObjectClass.self), "internal-name") != nil,
              let name = takeString(veil_object_get_string(gpointerOf(device), "internal-name")), !name.isEmpty else { return nil }
        let description = takeString(gst_device_get_display_name(device)) ?? name
        var isDefault: gboolean = 0
        var formFactor: String?
        if let properties = gst_device_get_properties(device) {
            _ = gst_structure_get_boolean(properties, "is-default", &isDefault)
            formFactor = gst_structure_get_string(properties, "device.form_factor").map { String(cString: $0) }
            gst_structure_free(properties)
        }
        return AudioDevice(name: name, description: description, isDefault: isDefault != 0, formFactor: formFactor)
    }

    /// The sink `device` names among `sinks`, or the default sink for nil; throws when there is none.
    static func resolveSink(_ device: String?, among sinks: [AudioDevice]) throws -> String {
        guard !sinks.isEmpty else {
            throw PeerError(.mediaFailed, "no sound server sink is available; is PulseAudio (or PipeWire's pulse server) running?")
        }
        guard let device else {
            guard let fallback = sinks.first(where: \.isDefault) else {
                throw PeerError(.mediaFailed, "the sound server names no default sink; choose one of: \(sinks.map(\.name).joined(separator: ", "))")
            }
            return fallback.name
        }
        guard sinks.contains(where: { $0.name == device }) else {
            throw PeerError(.invalidArgument, "there is no sink '\(device)' on the sound server; choose one of: \(sinks.map(\.name).joined(separator: ", "))")
        }
        return device
    }

    /// The sink the received voice plays on: the one chosen last with `setAudioOutputDevice(_:)`,
    /// else the one the `AudioOutput` named; nil for the server's default sink or a non-PulseAudio output.
    public var audioOutputDevice: String? { shared.withLock { $0.outputDevice } }

    /// Moves the received voice to another sink while the call goes on: the Linux counterpart of
    /// iOS's speaker override. `device` is a sink's `name` from `audioOutputDevices()`, or nil for
    /// the server's default sink. The stream moves on the sound server within milliseconds
    /// (pulsesink moves its sink input when its `device` changes; nothing is rebuilt); before
    /// remote audio arrives, the choice applies when it does. An output that could not start (no
    /// sound server when the remote audio arrived) stays silent for this connection.
    ///
    /// Throws `.invalidArgument` when the output is not `.pulse` or there is no such sink,
    /// `.mediaFailed` when no sound server answers, `.closed` after `close()`. Blocks while it asks
    /// the sound server for its sinks (see `audioOutputDevices()`).
    public func setAudioOutputDevice(_ device: String?) throws {
        guard playsOnPulse else {
            throw PeerError(.invalidArgument, "this connection's audio output is not PulseAudio; only a .pulse output can switch sinks")
        }
        guard !shared.withLock({ $0.closing }) else { throw PeerError(.closed, "the connection is closed") }
        applyAudioOutputDevice(try Self.resolveSink(device, among: Self.audioOutputDevices()))
    }

    /// Whether the received voice goes to the sound server.
    var playsOnPulse: Bool {
        if case .pulse = output { return true }
        return false
    }

    /// Points the receive branch's pulsesink at `sink` (a name known to exist). The branch reads
    /// `outputDevice` when it is built, so a switch before remote audio arrives is kept too.
    func applyAudioOutputDevice(_ sink: String) {
        guard playsOnPulse else { return }
        shared.withLock { $0.outputDevice = sink }
        onLoop { peer in
            guard let bin = peer.shared.withLock({ $0.receiveBin }),
                  let element = gst_bin_get_by_name(asBin(bin.element), "sink") else { return }
            // pulsesink's `device` setter moves the live stream (pa_context_move_sink_input_by_name).
            veil_object_set_string(gpointerOf(element), "device", sink)
            gst_object_unref(gpointerOf(element))
        }
    }
}
