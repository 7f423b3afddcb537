/// Pearson's correlation of two equally long series: how well a recovered signal follows the
/// scripted one, whatever its gain. 0 when either series is constant or has fewer than 3 values.
public func pearsonCorrelation(_ a: [Double], _ b: [Double]) -> Double {
    let n = Double(min(a.count, b.count))
    guard n > 2 else { return 0 }
    let ma = a.prefix(Int(n)).reduce(0, +) / n, mb = b.prefix(Int(n)).reduce(0, +) / n
    var ab = 0.0, aa = 0.0, bb = 0.0
    for (x, y) in zip(a, b) { ab += (x - ma) * (y - mb); aa += (x - ma) * (x - ma); bb += (y - mb) * (y - mb) }
    return aa > 0 && bb > 0 ? ab / (aa * bb).squareRoot() : 0
}
