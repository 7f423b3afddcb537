import Foundation

/// A `/metrics` answer as prometheus_client's parser (`prometheus_parse.py`, in the interop
/// environment beside python-osc) reads it: families and their samples. The parse fails when the
/// parser refuses the text.
public struct PrometheusText: Sendable {
    /// One sample: its name (a histogram's `_bucket`, `_sum`, `_count` included), labels and value.
    public struct Sample: Equatable, Sendable {
        public var name: String
        public var labels: [String: String]
        public var value: Double
    }
    /// One metric family.
    public struct Family: Sendable {
        public var name: String
        public var type: String
        public var documentation: String
        public var samples: [Sample]
    }

    /// The families in the order of the text.
    public let families: [Family]

    /// Parses `text` with prometheus_client.
    public init(parsing text: String) throws {
        let script = PythonOSCPeer.directory.appendingPathComponent("prometheus_parse.py")
        let output = try PythonOSCPeer.run([], input: Data(text.utf8), script: script)
        guard let root = try JSONSerialization.jsonObject(with: output) as? [String: Any],
              let families = root["families"] as? [[String: Any]] else {
            throw PythonOSCPeer.Failure("prometheus_parse.py wrote no families: \(String(decoding: output, as: UTF8.self))")
        }
        self.families = families.map { family in
            let samples = (family["samples"] as? [[String: Any]] ?? []).map { sample in
                Sample(name: sample["name"] as? String ?? "", labels: sample["labels"] as? [String: String] ?? [:],
                       value: (sample["value"] as? Double) ?? (sample["value"] as? NSNumber)?.doubleValue ?? .nan)
            }
            return Family(name: family["name"] as? String ?? "", type: family["type"] as? String ?? "",
                          documentation: family["documentation"] as? String ?? "", samples: samples)
        }
    }

    /// The family named `name` (a counter's family is named without `_total`).
    public func family(_ name: String) -> Family? { families.first { $0.name == name } }

    /// The value of the sample `name` with exactly `labels`, or nil when there is none.
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        families.lazy.flatMap(\.samples).first { $0.name == name && $0.labels == labels }?.value
    }
}
