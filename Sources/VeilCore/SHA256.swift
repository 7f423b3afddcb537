// SHA-256 (FIPS 180-4) and HMAC (RFC 2104) in pure Swift, for signing room tokens. Tokens are
// short, so clarity beats speed here; the test vectors are FIPS 180's and RFC 4231's.

/// A SHA-256 hash computation (FIPS 180-4). Feed bytes with `update`, read the digest with
/// `finalize`; `SHA256.hash(_:)` does both at once.
public struct SHA256: Sendable {
    /// Size of a digest in bytes.
    public static let digestSize = 32
    /// Size of the block the compression function consumes, in bytes (HMAC needs it).
    public static let blockSize = 64

    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)
    private var pending: [UInt8] = []
    private var length: UInt64 = 0 // bytes fed so far

    /// A fresh computation.
    public init() { pending.reserveCapacity(Self.blockSize) }

    /// The SHA-256 digest of `bytes`.
    public static func hash<Bytes: Sequence>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var sha = SHA256()
        sha.update(bytes)
        return sha.finalize()
    }

    /// Feeds more bytes.
    public mutating func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        for byte in bytes {
            pending.append(byte)
            length &+= 1
            if pending.count == Self.blockSize {
                compress(pending)
                pending.removeAll(keepingCapacity: true)
            }
        }
    }

    /// Pads the message and returns its 32-byte digest. The computation is spent afterwards.
    public mutating func finalize() -> [UInt8] {
        let bitLength = length &* 8
        var tail = pending
        tail.append(0x80)
        while tail.count % Self.blockSize != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        for start in stride(from: 0, to: tail.count, by: Self.blockSize) {
            compress(Array(tail[start..<start + Self.blockSize]))
        }
        pending.removeAll()
        let words = [state.0, state.1, state.2, state.3, state.4, state.5, state.6, state.7]
        return words.flatMap { word in [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: word >> UInt32($0)) } }
    }

    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    @inline(__always) private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

    private mutating func compress(_ block: [UInt8]) {
        var w = [UInt32](repeating: 0, count: 64)
        for t in 0..<16 {
            w[t] = UInt32(block[4 * t]) << 24 | UInt32(block[4 * t + 1]) << 16 | UInt32(block[4 * t + 2]) << 8 | UInt32(block[4 * t + 3])
        }
        for t in 16..<64 {
            let s0 = Self.rotr(w[t - 15], 7) ^ Self.rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
            let s1 = Self.rotr(w[t - 2], 17) ^ Self.rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
            w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, h) = state
        for t in 0..<64 {
            let s1 = Self.rotr(e, 6) ^ Self.rotr(e, 11) ^ Self.rotr(e, 25)
            let ch = (e & f) ^ (~e & g)
            let t1 = h &+ s1 &+ ch &+ Self.k[t] &+ w[t]
            let s0 = Self.rotr(a, 2) ^ Self.rotr(a, 13) ^ Self.rotr(a, 22)
            let maj = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ maj
            h = g; g = f; f = e; e = d &+ t1
            d = c; c = b; b = a; a = t1 &+ t2
        }
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d,
                 state.4 &+ e, state.5 &+ f, state.6 &+ g, state.7 &+ h)
    }
}

/// HMAC-SHA256 (RFC 2104): a message authentication code keyed with a secret.
public enum HMACSHA256 {
    /// The 32-byte authentication code of `message` under `key` (keys longer than a block are hashed first).
    public static func authenticationCode<Key: Collection, Message: Sequence>(for message: Message, key: Key) -> [UInt8]
    where Key.Element == UInt8, Message.Element == UInt8 {
        var block = key.count > SHA256.blockSize ? SHA256.hash(key) : Array(key)
        block += [UInt8](repeating: 0, count: SHA256.blockSize - block.count)
        var inner = SHA256()
        inner.update(block.map { $0 ^ 0x36 })
        inner.update(message)
        var outer = SHA256()
        outer.update(block.map { $0 ^ 0x5c })
        outer.update(inner.finalize())
        return outer.finalize()
    }

    /// Whether two codes are equal, in time that depends only on their lengths (so an attacker
    /// cannot find a valid code byte by byte by timing the comparison).
    public static func constantTimeEquals<A: Collection, B: Collection>(_ a: A, _ b: B) -> Bool
    where A.Element == UInt8, B.Element == UInt8 {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }
}
