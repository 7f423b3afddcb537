/// The VMC protocol (Virtual Motion Capture, protocol.vmc.info): OSC 1.0 over UDP, one way, from a
/// "Performer" (a tracker) to a "Marionette" (the app that draws the avatar).
///
/// The part of it a face needs, per frame (protocol version 2.5):
/// - `/VMC/Ext/OK` (i): 1 when a model is loaded and bones follow (later versions add ints: ignored).
/// - `/VMC/Ext/T` (f): the sender's relative time in seconds.
/// - `/VMC/Ext/Root/Pos` (s f f f f f f f): `"root"`, position x y z, rotation quaternion x y z w
///   (v2.1 adds scale and offset: ignored).
/// - `/VMC/Ext/Bone/Pos` (s f f f f f f f): a Unity `HumanBodyBones` name (`Head`, `LeftEye`,
///   `RightEye`…), local position, local rotation quaternion. See `EulerAngles+Unity.swift` for
///   Unity's left-handed frame and how Veil's angles map onto it.
/// - `/VMC/Ext/Blend/Val` (s f): a blendshape clip's name and value, one per clip; here ARKit's 52
///   names (the "perfect sync" set VSeeFace and others map onto VRM models).
/// - `/VMC/Ext/Blend/Apply` (no arguments): apply the values sent since the last apply.
///
/// The reference receiver ignores unknown addresses and extra arguments; so does `VMCReceiver`.
public enum VMC {
    /// Where Marionettes (VSeeFace, VMagicMirror, VNyan, Warudo…) listen by default.
    public static let marionettePort: UInt16 = 39539
    /// Where Virtual Motion Capture itself listens for Performers' input by default.
    public static let performerPort: UInt16 = 39540

    /// The addresses Veil sends and reads.
    public enum Address {
        public static let ok = "/VMC/Ext/OK"
        public static let time = "/VMC/Ext/T"
        public static let root = "/VMC/Ext/Root/Pos"
        public static let bone = "/VMC/Ext/Bone/Pos"
        public static let blendValue = "/VMC/Ext/Blend/Val"
        public static let blendApply = "/VMC/Ext/Blend/Apply"
    }

    /// The bone names Veil sends and reads (Unity's `HumanBodyBones`).
    public enum Bone {
        public static let head = "Head"
        public static let leftEye = "LeftEye"
        public static let rightEye = "RightEye"
        /// The name `/VMC/Ext/Root/Pos` carries.
        public static let root = "root"
    }
}
