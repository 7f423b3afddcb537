import Foundation
import VeilCore

/// A physical facial action of a synthetic clip, defined by how far parts of the face move (as
/// fractions of the face's own size), not by any estimator's coefficients.
public enum FacialAction: String, CaseIterable, Codable, Sendable {
    /// How far the chin and lower lip drop, as a fraction of face height (forehead top to chin).
    /// Typical speech: 0…0.12.
    case jawDrop
    /// Closure of the person's left eye (the viewer's right): 0 open … 1 lids shut.
    case blinkLeft
    /// Closure of the person's right eye (the viewer's left): 0 open … 1 lids shut.
    case blinkRight
    /// Mouth-corner lift and spread: 1 moves each corner by a quarter of the mouth width, outward
    /// and upward.
    case smile
    /// Brow lift: 1 raises the brows by 0.35 of the eye-to-brow distance.
    case browRaise
    /// Head turn in degrees about the vertical axis, with Veil's `HeadPose.yaw` sign: positive
    /// turns the face to its own left (the nose moves towards the viewer's right).
    case headYaw
    /// Mouth-corner drop: 1 moves each corner down by a sixth of the mouth width, a little inward.
    case frown
    /// Lip rounding, as in "oo" or a kiss: 1 narrows the mouth by a third of its width and pushes
    /// the lips out.
    case pucker
    /// Head nod in degrees about the horizontal axis, with Veil's `HeadPose.pitch` sign: positive
    /// tilts the chin up.
    case headPitch
    /// Eye turn in degrees, both eyes, with `headYaw`'s sign: positive looks towards the person's
    /// own left (the pupils move towards the viewer's right) by 0.4 eye widths × sin(angle).
    case gazeYaw
    /// Eye turn in degrees up (positive) or down, both eyes, the pupils moving 0.4 eye widths ×
    /// sin(angle) towards the forehead.
    case gazePitch

    /// The values a script may use for this action.
    public var range: ClosedRange<Double> {
        switch self {
        case .jawDrop: return 0...0.3
        case .blinkLeft, .blinkRight, .smile, .browRaise, .frown, .pucker: return 0...1
        case .headYaw, .headPitch, .gazeYaw, .gazePitch: return -30...30
        }
    }
}

/// The value of every action at one instant of a script.
public struct ScriptState: Equatable, Codable, Sendable {
    /// Fraction of face height the chin and lower lip drop.
    public var jawDrop: Double
    /// Closure of the person's left eye, 0…1.
    public var blinkLeft: Double
    /// Closure of the person's right eye, 0…1.
    public var blinkRight: Double
    /// Mouth-corner lift and spread, 0…1.
    public var smile: Double
    /// Brow lift, 0…1.
    public var browRaise: Double
    /// Head turn in degrees (positive: towards the person's own left).
    public var headYaw: Double
    /// Mouth-corner drop, 0…1.
    public var frown: Double
    /// Lip rounding, 0…1.
    public var pucker: Double
    /// Head nod in degrees (positive: chin up).
    public var headPitch: Double
    /// Eye turn in degrees (positive: towards the person's own left).
    public var gazeYaw: Double
    /// Eye turn in degrees (positive: up).
    public var gazePitch: Double

    /// A state with the given action values (all zero by default).
    public init(jawDrop: Double = 0, blinkLeft: Double = 0, blinkRight: Double = 0, smile: Double = 0,
                browRaise: Double = 0, headYaw: Double = 0, frown: Double = 0, pucker: Double = 0, headPitch: Double = 0,
                gazeYaw: Double = 0, gazePitch: Double = 0) {
        self.jawDrop = jawDrop; self.blinkLeft = blinkLeft; self.blinkRight = blinkRight
        self.smile = smile; self.browRaise = browRaise; self.headYaw = headYaw
        self.frown = frown; self.pucker = pucker; self.headPitch = headPitch
        self.gazeYaw = gazeYaw; self.gazePitch = gazePitch
    }

    /// The photo's own face: every action at zero.
    public static let neutral = ScriptState()

    /// This state with every value clamped to its action's `range` (NaN becomes 0).
    public var clamped: ScriptState {
        var out = self
        for action in FacialAction.allCases {
            let v = self[action]
            out[action] = v.isNaN ? 0 : min(max(v, action.range.lowerBound), action.range.upperBound)
        }
        return out
    }

    /// The value of `action`.
    public subscript(action: FacialAction) -> Double {
        get {
            switch action {
            case .jawDrop: return jawDrop
            case .blinkLeft: return blinkLeft
            case .blinkRight: return blinkRight
            case .smile: return smile
            case .browRaise: return browRaise
            case .headYaw: return headYaw
            case .frown: return frown
            case .pucker: return pucker
            case .headPitch: return headPitch
            case .gazeYaw: return gazeYaw
            case .gazePitch: return gazePitch
            }
        }
        set {
            switch action {
            case .jawDrop: jawDrop = newValue
            case .blinkLeft: blinkLeft = newValue
            case .blinkRight: blinkRight = newValue
            case .smile: smile = newValue
            case .browRaise: browRaise = newValue
            case .headYaw: headYaw = newValue
            case .frown: frown = newValue
            case .pucker: pucker = newValue
            case .headPitch: headPitch = newValue
            case .gazeYaw: gazeYaw = newValue
            case .gazePitch: gazePitch = newValue
            }
        }
    }
}

/// One line of a clip's ground truth: the scripted state of one frame.
public struct GroundTruthFrame: Equatable, Codable, Sendable {
    /// Frame number from 0.
    public var frame: Int
    /// Presentation time of the frame, `frame / framesPerSecond`.
    public var timeSeconds: Double
    /// See `FacialAction.jawDrop`.
    public var jawDrop: Double
    /// See `FacialAction.blinkLeft`.
    public var blinkLeft: Double
    /// See `FacialAction.blinkRight`.
    public var blinkRight: Double
    /// See `FacialAction.smile`.
    public var smile: Double
    /// See `FacialAction.browRaise`.
    public var browRaise: Double
    /// See `FacialAction.headYaw` (degrees).
    public var headYaw: Double
    /// See `FacialAction.frown`.
    public var frown: Double
    /// See `FacialAction.pucker`.
    public var pucker: Double
    /// See `FacialAction.headPitch` (degrees).
    public var headPitch: Double
    /// See `FacialAction.gazeYaw` (degrees).
    public var gazeYaw: Double
    /// See `FacialAction.gazePitch` (degrees).
    public var gazePitch: Double

    /// The ground truth of frame `frame` at `timeSeconds` in `state`.
    public init(frame: Int, timeSeconds: Double, state: ScriptState) {
        self.frame = frame; self.timeSeconds = timeSeconds
        jawDrop = state.jawDrop; blinkLeft = state.blinkLeft; blinkRight = state.blinkRight
        smile = state.smile; browRaise = state.browRaise; headYaw = state.headYaw
        frown = state.frown; pucker = state.pucker; headPitch = state.headPitch
        gazeYaw = state.gazeYaw; gazePitch = state.gazePitch
    }

    /// The scripted state of this frame.
    public var state: ScriptState {
        ScriptState(jawDrop: jawDrop, blinkLeft: blinkLeft, blinkRight: blinkRight, smile: smile,
                    browRaise: browRaise, headYaw: headYaw, frown: frown, pucker: pucker, headPitch: headPitch,
                    gazeYaw: gazeYaw, gazePitch: gazePitch)
    }
}

/// A timeline of facial actions: per action, keyframes `(time, value)` joined by smoothstep
/// easing, so each value is exact at its keys, moves monotonically between two keys and starts and
/// stops without a jump in speed. Before its first key an action holds the first value, after its
/// last key the last value; an action without keys stays at 0.
///
/// Two text forms are read (`init(parsing:)`) and written:
///
/// JSON (`jsonData()`):
/// ```json
/// {"fps": 30, "duration": 9,
///  "tracks": {"jawDrop": [[0, 0], [0.2, 0.06], [0.4, 0]], "blink": [[1.0, 0], [1.08, 1], [1.2, 0]]}}
/// ```
/// Compact text (`textForm`), one action per line, `#` starts a comment:
/// ```
/// fps 30
/// duration 9
/// jawDrop 0:0 0.2:0.06 0.4:0
/// blink 1.0:0 1.08:1 1.2:0
/// ```
/// `blink` is shorthand for the same keys on `blinkLeft` and `blinkRight`. Key times are seconds
/// from the start and must increase within a track.
public struct ExpressionScript: Equatable, Sendable {
    /// A value an action reaches at a time.
    public struct Keyframe: Equatable, Codable, Sendable {
        /// Seconds from the start of the clip.
        public var time: Double
        /// The action's value, in the units of its `FacialAction`.
        public var value: Double
        /// A key at `time` with `value`.
        public init(time: Double, value: Double) { self.time = time; self.value = value }
    }

    /// Frames per second of the clip.
    public internal(set) var framesPerSecond: Double
    /// Length of the clip in seconds.
    public internal(set) var duration: Double
    /// Keys per action, in increasing time.
    public internal(set) var tracks: [FacialAction: [Keyframe]]

    /// A script after checking that rates and times are positive, key times increase and values
    /// lie in each action's `range`.
    public init(framesPerSecond: Double = 30, duration: Double, tracks: [FacialAction: [Keyframe]]) throws {
        guard framesPerSecond.isFinite, framesPerSecond > 0, framesPerSecond <= 1000 else {
            throw VeilError.invalidInput("script fps must be a number in (0, 1000], got \(framesPerSecond)")
        }
        guard duration.isFinite, duration > 0, duration <= 24 * 3600 else {
            throw VeilError.invalidInput("script duration must be a positive number of seconds, got \(duration)")
        }
        for (action, keys) in tracks {
            var previous = -Double.infinity
            for key in keys {
                guard key.time.isFinite, key.value.isFinite, key.time >= 0 else {
                    throw VeilError.invalidInput("\(action.rawValue): key times must be non-negative numbers and values finite")
                }
                guard key.time > previous else {
                    throw VeilError.invalidInput("\(action.rawValue): key times must increase (\(key.time) after \(previous))")
                }
                guard action.range.contains(key.value) else {
                    throw VeilError.invalidInput("\(action.rawValue): value \(key.value) at \(key.time) s is outside \(action.range)")
                }
                previous = key.time
            }
        }
        self.framesPerSecond = framesPerSecond
        self.duration = duration
        self.tracks = tracks.filter { !$0.value.isEmpty }
    }

    /// Number of frames: `duration × fps`, rounded.
    public var frameCount: Int { max(1, Int((duration * framesPerSecond).rounded())) }

    /// Time of frame `frame`, in seconds.
    public func time(ofFrame frame: Int) -> Double { Double(frame) / framesPerSecond }

    /// The value of `action` at `time` seconds.
    public func value(of action: FacialAction, at time: Double) -> Double {
        guard let keys = tracks[action], let first = keys.first, let last = keys.last else { return 0 }
        if time <= first.time { return first.value }
        if time >= last.time { return last.value }
        // Binary search for the last key at or before `time`.
        var lo = 0, hi = keys.count - 1
        while hi - lo > 1 {
            let mid = (lo + hi) / 2
            if keys[mid].time <= time { lo = mid } else { hi = mid }
        }
        let a = keys[lo], b = keys[hi]
        let t = (time - a.time) / (b.time - a.time)
        let eased = t * t * (3 - 2 * t)
        return a.value + (b.value - a.value) * eased
    }

    /// Every action's value at `time` seconds.
    public func state(at time: Double) -> ScriptState {
        var state = ScriptState()
        for action in FacialAction.allCases { state[action] = value(of: action, at: time) }
        return state
    }

    /// The state of frame `frame`.
    public func state(ofFrame frame: Int) -> ScriptState { state(at: time(ofFrame: frame)) }

    /// Ground truth for every frame of the clip.
    public var groundTruth: [GroundTruthFrame] {
        (0..<frameCount).map { GroundTruthFrame(frame: $0, timeSeconds: time(ofFrame: $0), state: state(ofFrame: $0)) }
    }

    /// Ground truth as JSON lines: one object per frame with keys `frame`, `timeSeconds`, `jawDrop`,
    /// `blinkLeft`, `blinkRight`, `smile`, `browRaise`, `headYaw`, `frown`, `pucker`, `headPitch`,
    /// `gazeYaw`, `gazePitch`, each line ending in a newline.
    public func groundTruthJSONLines() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var out = ""
        for frame in groundTruth {
            out += String(decoding: try encoder.encode(frame), as: UTF8.self)
            out += "\n"
        }
        return out
    }
}

// MARK: - Reading and writing

extension ExpressionScript {
    private struct File: Codable {
        var fps: Double?
        var duration: Double
        var tracks: [String: [[Double]]]
    }

    /// Reads a script in either form: JSON when the text starts with `{`, compact text otherwise.
    public init(parsing text: String) throws {
        if text.drop(while: { $0.isWhitespace }).first == "{" {
            try self.init(json: Data(text.utf8))
        } else {
            try self.init(compactText: text)
        }
    }

    /// Reads a script file in either form.
    public init(contentsOf url: URL) throws {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw VeilError.io("cannot read script \(url.path): \(error.localizedDescription)")
        }
        try self.init(parsing: String(decoding: data, as: UTF8.self))
    }

    /// Reads the JSON form.
    public init(json: Data) throws {
        let file: File
        do { file = try JSONDecoder().decode(File.self, from: json) } catch {
            throw VeilError.invalidInput("script JSON must look like {\"fps\": 30, \"duration\": 9, \"tracks\": {\"jawDrop\": [[0, 0], [0.2, 0.05]]}}: \(error)")
        }
        var tracks: [FacialAction: [Keyframe]] = [:]
        for (name, pairs) in file.tracks {
            var keys: [Keyframe] = []
            for pair in pairs {
                guard pair.count == 2 else {
                    throw VeilError.invalidInput("\(name): each key must be [time, value], got \(pair)")
                }
                keys.append(Keyframe(time: pair[0], value: pair[1]))
            }
            try Self.add(keys, named: name, to: &tracks)
        }
        try self.init(framesPerSecond: file.fps ?? 30, duration: file.duration, tracks: tracks)
    }

    /// Reads the compact text form.
    public init(compactText text: String) throws {
        var fps = 30.0
        var duration: Double?
        var tracks: [FacialAction: [Keyframe]] = [:]
        for (n, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "," })
            guard let head = words.first else { continue }
            let rest = words.dropFirst()
            func number(_ word: Substring) throws -> Double {
                guard let v = Double(word), v.isFinite else {
                    throw VeilError.invalidInput("script line \(n + 1): '\(word)' is not a number")
                }
                return v
            }
            switch head {
            case "fps", "duration":
                guard rest.count == 1, let word = rest.first else {
                    throw VeilError.invalidInput("script line \(n + 1): '\(head)' takes one number")
                }
                if head == "fps" { fps = try number(word) } else { duration = try number(word) }
            default:
                var keys: [Keyframe] = []
                for word in rest {
                    let parts = word.split(separator: ":", omittingEmptySubsequences: false)
                    guard parts.count == 2 else {
                        throw VeilError.invalidInput("script line \(n + 1): key '\(word)' must be time:value")
                    }
                    keys.append(Keyframe(time: try number(parts[0]), value: try number(parts[1])))
                }
                try Self.add(keys, named: String(head), to: &tracks)
            }
        }
        let lastKey = tracks.values.compactMap { $0.last?.time }.max()
        guard let length = duration ?? lastKey else {
            throw VeilError.invalidInput("script has neither a 'duration' line nor any keys")
        }
        try self.init(framesPerSecond: fps, duration: length, tracks: tracks)
    }

    private static func add(_ keys: [Keyframe], named name: String, to tracks: inout [FacialAction: [Keyframe]]) throws {
        let actions: [FacialAction]
        if name == "blink" { actions = [.blinkLeft, .blinkRight] }
        else if let action = FacialAction(rawValue: name) { actions = [action] }
        else {
            let known = (["blink"] + FacialAction.allCases.map(\.rawValue)).joined(separator: ", ")
            throw VeilError.invalidInput("unknown script action '\(name)'; known: \(known)")
        }
        for action in actions {
            guard tracks[action] == nil else {
                throw VeilError.invalidInput("script sets \(action.rawValue) twice")
            }
            tracks[action] = keys
        }
    }

    /// The JSON form (keys sorted, so equal scripts give equal bytes).
    public func jsonData() throws -> Data {
        var named: [String: [[Double]]] = [:]
        for (action, keys) in tracks { named[action.rawValue] = keys.map { [$0.time, $0.value] } }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(File(fps: framesPerSecond, duration: duration, tracks: named))
    }

    /// The compact text form, actions in `FacialAction` order.
    public var textForm: String {
        var lines = ["fps \(Self.format(framesPerSecond))", "duration \(Self.format(duration))"]
        for action in FacialAction.allCases {
            guard let keys = tracks[action] else { continue }
            lines.append(([action.rawValue] + keys.map { "\(Self.format($0.time)):\(Self.format($0.value))" }).joined(separator: " "))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Shortest decimal text that reads back as the same Double.
    private static func format(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : "\(v)"
    }
}
