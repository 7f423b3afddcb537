import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The files of a directory served read-only over HTTP: the browser client (`web/`) at `/`.
///
/// Only what a web page needs, and nothing that could reach outside the directory:
/// - `GET` and `HEAD`; `/` is `index.html`, a path ending in `/` its folder's `index.html`;
/// - only known kinds of file (html, css, js, json, svg, png, ico, wav, txt), each with its content type;
/// - no segment that is empty, `.` or `..` or starts with a dot (no `.git`, no `.env`), no backslash
///   or control character, after percent-decoding; the resolved real path (symbolic links followed)
///   must lie inside the root's real path, so a link pointing out of it is not followed;
/// - regular files of at most `maximumFileSize` bytes.
///
/// Everything else is `nil` (the server answers 404). Answers carry an `ETag` (size and
/// modification time) and `Cache-Control: no-cache`: the browser revalidates every load and gets a
/// bodiless 304 when nothing changed, so a new version of the page is never masked by a cache.
///
/// Pure logic on the file system, without libsoup: `RoomServer` turns a `Response` into HTTP.
public struct StaticFiles: Sendable {
    /// One answer.
    public struct Response: Sendable, Equatable {
        /// 200, or 304 when the client's `If-None-Match` matches.
        public var status: UInt32
        /// The content type, with the charset for text.
        public var contentType: String
        /// The file's bytes (empty for 304; for HEAD too, libsoup sends the headers only).
        public var body: [UInt8]
        /// Headers beyond the content type.
        public var headers: [(String, String)]

        public static func == (a: Response, b: Response) -> Bool {
            a.status == b.status && a.contentType == b.contentType && a.body == b.body
                && a.headers.map { "\($0.0): \($0.1)" } == b.headers.map { "\($0.0): \($0.1)" }
        }
    }

    /// The largest file served; larger ones are answered 404. The client's files are a few tens of KB.
    public static let maximumFileSize = 4 * 1024 * 1024

    /// Content types by file-name extension; files of any other kind are not served.
    public static let contentTypes: [String: String] = [
        "html": "text/html; charset=utf-8",
        "css": "text/css; charset=utf-8",
        "js": "text/javascript; charset=utf-8",
        "mjs": "text/javascript; charset=utf-8",
        "json": "application/json",
        "svg": "image/svg+xml",
        "png": "image/png",
        "ico": "image/x-icon",
        "wav": "audio/wav",
        "txt": "text/plain; charset=utf-8",
    ]

    /// The policy sent with HTML: scripts, styles and connections only from this server (the
    /// WebSocket included), and no camera for the page or anything it embeds; the microphone for
    /// this origin only.
    public static let pagePolicies: [(String, String)] = [
        ("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data: blob:; media-src 'self' blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"),
        ("Permissions-Policy", "camera=(), microphone=(self), display-capture=(), geolocation=()"),
        ("Referrer-Policy", "no-referrer"),
    ]

    /// The directory's real path (symbolic links resolved).
    public let root: String

    /// Serves `directory`. Throws when it does not exist or is not a directory.
    public init(directory: URL) throws {
        guard let real = Self.realPath(directory.path) else {
            throw StaticFilesError("the web directory \(directory.path) does not exist")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: real, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw StaticFilesError("\(directory.path) is not a directory")
        }
        root = real
    }

    /// What to answer for `method` on `path` (the request's path, percent-encoded or not), or nil
    /// for 404. `ifNoneMatch` is the request's `If-None-Match` header.
    public func response(method: String, path: String, ifNoneMatch: String? = nil) -> Response? {
        guard method == "GET" || method == "HEAD", let file = resolve(path) else { return nil }
        var info = stat()
        guard stat(file.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
              info.st_size <= Self.maximumFileSize else { return nil }
        let tag = "\"\(String(info.st_size, radix: 16))-\(String(info.st_mtim.tv_sec, radix: 16))\(String(info.st_mtim.tv_nsec / 1000, radix: 16))\""
        var headers: [(String, String)] = [("ETag", tag), ("Cache-Control", "no-cache"), ("X-Content-Type-Options", "nosniff")]
        if file.contentType.hasPrefix("text/html") { headers += Self.pagePolicies }
        if let ifNoneMatch, ifNoneMatch.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == tag }) {
            return Response(status: 304, contentType: file.contentType, body: [], headers: headers)
        }
        guard let data = FileManager.default.contents(atPath: file.path), data.count <= Self.maximumFileSize else { return nil }
        return Response(status: 200, contentType: file.contentType, body: Array(data), headers: headers)
    }

    /// The file `path` names inside the root, with its content type; nil when the path is not
    /// acceptable or leads outside the root.
    func resolve(_ path: String) -> (path: String, contentType: String)? {
        guard path.hasPrefix("/"), path.utf8.count <= 1024, let decoded = path.removingPercentEncoding else { return nil }
        var segments = decoded.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        if segments.last == "" { segments[segments.count - 1] = "index.html" }
        guard !segments.isEmpty, segments.allSatisfy(Self.isAcceptableSegment),
              let name = segments.last, let dot = name.lastIndex(of: "."),
              let contentType = Self.contentTypes[name[name.index(after: dot)...].lowercased()] else { return nil }
        let candidate = root + "/" + segments.joined(separator: "/")
        guard let real = Self.realPath(candidate), real.hasPrefix(root + "/") else { return nil }
        return (real, contentType)
    }

    static func isAcceptableSegment(_ segment: String) -> Bool {
        !segment.isEmpty && !segment.hasPrefix(".") && segment.utf8.count <= 255
            && !segment.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || $0 == "\\" }
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// The web directory cannot be served.
public struct StaticFilesError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
