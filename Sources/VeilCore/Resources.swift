import Foundation

/// Where Veil finds the files scripts/bootstrap installs: the models, the mesh topology, the
/// LiteRT runtime and test photos. `VEIL_CACHE` overrides; otherwise `.cache/veil` in the nearest
/// enclosing directory that has one (from the working directory, then from the executable).
public enum VeilResources {
    /// The cache directory, or nil when none is found.
    public static var cacheDirectory: URL? {
        let fm = FileManager.default
        if let env = ProcessInfo.processInfo.environment["VEIL_CACHE"], !env.isEmpty {
            return URL(fileURLWithPath: env, isDirectory: true)
        }
        var starts = [URL(fileURLWithPath: fm.currentDirectoryPath, isDirectory: true)]
        starts.append(URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath().deletingLastPathComponent())
        starts.append(URL(fileURLWithPath: #filePath).deletingLastPathComponent())
        for start in starts {
            var dir = start.standardizedFileURL
            while true {
                let candidate = dir.appendingPathComponent(".cache/veil/models", isDirectory: true)
                if fm.fileExists(atPath: candidate.path) { return dir.appendingPathComponent(".cache/veil", isDirectory: true) }
                let parent = dir.deletingLastPathComponent()
                if parent.path == dir.path { break }
                dir = parent
            }
        }
        return nil
    }

    /// The file `name` under the cache's `folder`, or a clear error when it is not there.
    public static func file(_ folder: String, _ name: String) throws -> URL {
        guard let cache = cacheDirectory else {
            throw VeilError.missingResource("Veil's cache (.cache/veil): run `make` or scripts/bootstrap in the checkout, or set VEIL_CACHE")
        }
        let url = cache.appendingPathComponent(folder).appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw VeilError.missingResource("\(url.path): run scripts/bootstrap")
        }
        return url
    }
}
