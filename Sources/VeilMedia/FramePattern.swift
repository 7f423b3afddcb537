/// A numbered file name such as `frame_%05d.png`: one printf-style integer conversion (`%d`, `%5d`,
/// `%05d`) and `%%` for a literal percent sign. GStreamer's multifilesrc and multifilesink hand the
/// pattern to printf with one integer, so anything else (`%s`, two numbers) is rejected here first.
struct FramePattern: Equatable {
    /// The pattern as given, which is what GStreamer receives.
    let pattern: String
    private let prefix: String
    private let suffix: String
    private let width: Int
    private let zeroPadded: Bool

    init(_ pattern: String) throws {
        var prefix = "", suffix = ""
        var width = 0, zeroPadded = false, conversions = 0
        var chars = pattern[...]
        func fail(_ why: String) -> MediaError {
            MediaError(.invalidArgument, "invalid numbered file pattern '\(pattern)': \(why); use one number like frame_%05d.png (write %% for a literal %)")
        }
        while let c = chars.popFirst() {
            guard c == "%" else {
                if conversions == 0 { prefix.append(c) } else { suffix.append(c) }
                continue
            }
            if chars.first == "%" {
                chars.removeFirst()
                if conversions == 0 { prefix.append("%") } else { suffix.append("%") }
                continue
            }
            conversions += 1
            guard conversions == 1 else { throw fail("it has more than one number") }
            if chars.first == "0" { zeroPadded = true; chars.removeFirst() }
            var digits = ""
            while let d = chars.first, d.isASCII, d.isNumber { digits.append(d); chars.removeFirst() }
            guard digits.count <= 2, let w = Int(digits.isEmpty ? "0" : digits), w <= 20 else { throw fail("the number's width is too large") }
            width = w
            guard chars.popFirst() == "d" else { throw fail("only %d-style numbers are allowed") }
        }
        guard conversions == 1 else { throw fail("it has no %d number") }
        guard !suffix.contains("/") else { throw fail("the number must be in the file name, not in a directory name") }
        self.pattern = pattern
        self.prefix = prefix; self.suffix = suffix; self.width = width; self.zeroPadded = zeroPadded
    }

    /// The file name for frame `index` (as printf would format it).
    func path(for index: Int) -> String {
        let digits = String(index)
        let padding = String(repeating: zeroPadded ? "0" : " ", count: max(0, width - digits.count))
        return prefix + padding + digits + suffix
    }

    /// The lower-cased extension of the file names (`png`), or "" when they have none.
    var fileExtension: String {
        let name = suffix.split(separator: "/").last.map(String.init) ?? suffix
        guard let dot = name.lastIndex(of: ".") else { return "" }
        return name[name.index(after: dot)...].lowercased()
    }

    /// The directory part of the pattern ("." when there is none); it contains no number.
    var directory: String {
        guard let slash = prefix.lastIndex(of: "/") else { return "." }
        let dir = String(prefix[..<slash])
        return dir.isEmpty ? "/" : dir
    }
}
