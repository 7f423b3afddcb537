import Foundation
import VeilCore
import VeilVision
import XCTest
@testable import VeilBench

/// The bench chart draws what it is given: bars as long as their values say, on a linear and a
/// logarithmic scale, Veil's in its own colour, into a real PNG.
final class BenchChartTests: XCTestCase {
    private func chart() -> BenchChart {
        BenchChart(title: "test", subtitle: "subtitle", panels: [
            BenchChart.Panel(title: "ms per frame", scale: .linear, unit: .millisecondsPerFrame, bars: [
                BenchChart.Bar(label: "Veil", value: 8, isVeil: true),
                BenchChart.Bar(label: "peer A", value: 4, isVeil: false),
                BenchChart.Bar(label: "peer B", value: 2, isVeil: false),
            ]),
            BenchChart.Panel(title: "bytes per second", scale: .logarithmic, unit: .bytesPerSecond, bars: [
                BenchChart.Bar(label: "Veil", value: 100, isVeil: true),
                BenchChart.Bar(label: "a stream", value: 1_000, isVeil: false),
                BenchChart.Bar(label: "video", value: 10_000, isVeil: false),
                BenchChart.Bar(label: "quoted", value: 10_000, isVeil: false, isQuoted: true, low: 1_000),
            ]),
        ])
    }

    /// How far the bar's colour runs along the row through the middle of `rect`, in pixels.
    private func measuredLength(_ image: RGBImage, _ rect: Rect, veil: Bool) -> Int {
        let y = Int(rect.y + rect.height / 2)
        let color = veil ? BenchChart.veilColor : BenchChart.otherColor
        let target = SIMD3(Int((color.red * 255).rounded()), Int((color.green * 255).rounded()), Int((color.blue * 255).rounded()))
        var x = Int(rect.x.rounded(.up))
        while x < image.width {
            let i = (y * image.width + x) * 3
            let pixel = SIMD3(Int(image.pixels[i]), Int(image.pixels[i + 1]), Int(image.pixels[i + 2]))
            let difference = pixel &- target
            if difference.x * difference.x + difference.y * difference.y + difference.z * difference.z > 3 * 30 * 30 { break }
            x += 1
        }
        return x - Int(rect.x.rounded(.up))
    }

    func testBarsAreAsLongAsTheirValuesOnBothScales() throws {
        let chart = chart()
        let (canvas, layout) = try chart.render()
        let image = canvas.rgbImage()
        XCTAssertEqual(image.width, chart.width)
        XCTAssertEqual(image.height, layout.height)

        // Linear: 8, 4, 2 ms; the axis ends at 8, so the first bar spans the plot.
        let linear = layout.panels[0]
        let lengths = zip(chart.panels[0].bars, linear.bars).map { bar, rect in
            measuredLength(image, rect, veil: bar.isVeil)
        }
        XCTAssertEqual(Double(lengths[0]), Double(linear.plot.width), accuracy: 2)
        XCTAssertEqual(Double(lengths[1]), Double(lengths[0]) / 2, accuracy: 2)
        XCTAssertEqual(Double(lengths[2]), Double(lengths[0]) / 4, accuracy: 2)

        // Logarithmic: 100, 1000, 10000 B/s on an axis from 10 to 10 000 B/s: 1/3, 2/3, 3/3.
        let log = layout.panels[1]
        XCTAssertEqual(log.domain, 1...4)
        let logLengths = zip(chart.panels[1].bars.prefix(3), log.bars).map { bar, rect in
            measuredLength(image, rect, veil: bar.isVeil)
        }
        let third = Double(log.plot.width) / 3
        XCTAssertEqual(Double(logLengths[0]), third, accuracy: 2)
        XCTAssertEqual(Double(logLengths[1]), 2 * third, accuracy: 2)
        XCTAssertEqual(Double(logLengths[2]), 3 * third, accuracy: 2)
        XCTAssertEqual(Double(log.bars[3].width), 3 * third, accuracy: 0.5, "a range bar runs to its high end")
    }

    func testWritesANonEmptyPNG() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("veil-chart-\(UUID().uuidString).png").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try chart().writePNG(to: path)
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(Array(data.prefix(8)), [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "PNG signature")
        XCTAssertGreaterThan(data.count, 5_000, "text, bars and axes, not a blank image")
        XCTAssertThrowsError(try chart().writePNG(to: "/nonexistent-dir/chart.png"))
    }

    func testValuesThatCannotBeDrawnGetNoBar() throws {
        let chart = BenchChart(title: "t", subtitle: nil, panels: [
            BenchChart.Panel(title: "log", scale: .logarithmic, unit: .bytesPerSecond, bars: [
                BenchChart.Bar(label: "zero", value: 0, isVeil: false),
                BenchChart.Bar(label: "nan", value: .nan, isVeil: false),
                BenchChart.Bar(label: "one", value: 50, isVeil: true),
            ]),
        ])
        let (_, layout) = try chart.render()
        XCTAssertEqual(layout.panels[0].bars[0].width, 0)
        XCTAssertEqual(layout.panels[0].bars[1].width, 0)
        XCTAssertGreaterThan(layout.panels[0].bars[2].width, 0)
    }

    func testUnitsFormatValuesAndTicks() {
        XCTAssertEqual(BenchChart.Unit.millisecondsPerFrame.format(2.594), "2.59 ms")
        XCTAssertEqual(BenchChart.Unit.bytesPerSecond.format(1311), "1.3 kB/s · 10 kbit/s")
        XCTAssertEqual(BenchChart.Unit.bytesPerSecond.tick(1000), "1 kB/s")
        XCTAssertEqual(BenchChart.Unit.bytesPerSecond.tick(100), "100 B/s")
        XCTAssertEqual(BenchChart.Unit.bytesPerSecond.format(75_000, 150_000), "75–150 kB/s · 600–1200 kbit/s")
    }
}
