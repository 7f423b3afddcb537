import Foundation
import VeilCairo
import VeilCore
import VeilVision
import VeilRender

/// A chart of benchmark results: panels of labelled horizontal bars, Veil's highlighted, drawn with
/// Veil's own Cairo canvas and written as a PNG.
///
/// It knows nothing about where the numbers come from: give it bars (label, value, whether it is
/// Veil's) per panel. `BenchReport.chart` fills it from a `veil bench` run; other measurements
/// (tracking peers, say) add bars to a panel the same way.
public struct BenchChart {
    /// One bar.
    struct Bar {
        var label: String
        var value: Double
        /// Veil's own figure: drawn in the highlight colour.
        var isVeil: Bool
        /// A figure quoted from elsewhere, not measured: drawn hatched.
        var isQuoted = false
        /// For a range (quoted figures): the bar is solid up to `low` and lighter from there to `value`.
        var low: Double?
        /// Text after the bar; by default the value in the panel's unit.
        var valueText: String?
    }

    /// How values map to lengths.
    enum Scale {
        /// Proportional, from 0.
        case linear
        /// Proportional to the logarithm, between powers of ten around the values.
        case logarithmic
    }

    /// What the values are, for tick labels and value texts.
    enum Unit {
        case millisecondsPerFrame
        /// A delay (mouth to ear).
        case milliseconds
        case bytesPerSecond

        /// The value as shown after a bar.
        func format(_ value: Double) -> String {
            switch self {
            case .millisecondsPerFrame:
                return value < 10 ? String(format: "%.2f ms", value) : String(format: "%.1f ms", value)
            case .milliseconds:
                // A relay across nodes takes a few milliseconds: whole ones would hide it.
                return value < 10 ? String(format: "%.1f ms", value) : String(format: "%.0f ms", value)
            case .bytesPerSecond:
                let kbit = value * 8 / 1000
                let bits = kbit < 10 ? String(format: "%.1f kbit/s", kbit) : String(format: "%.0f kbit/s", kbit)
                return "\(Self.bytes(value))/s · \(bits)"
            }
        }

        /// A range as shown after a bar: "75–150 kB/s · 600–1200 kbit/s".
        func format(_ low: Double, _ high: Double) -> String {
            switch self {
            case .millisecondsPerFrame, .milliseconds:
                return "\(String(format: "%g", low))–\(format(high))"
            case .bytesPerSecond:
                let lowText = Self.bytes(low), highText = Self.bytes(high)
                let lowUnit = lowText.split(separator: " ").last, highUnit = highText.split(separator: " ").last
                let bytes = lowUnit == highUnit ? "\(lowText.split(separator: " ").first ?? "")–\(highText)" : "\(lowText)–\(highText)"
                return String(format: "%@/s · %.0f–%.0f kbit/s", bytes, low * 8 / 1000, high * 8 / 1000)
            }
        }

        /// A tick label.
        func tick(_ value: Double) -> String {
            switch self {
            case .millisecondsPerFrame, .milliseconds: return String(format: "%g ms", value)
            case .bytesPerSecond: return "\(Self.bytes(value))/s"
            }
        }

        /// "950 B", "1.3 kB", "62 kB", "3.4 MB" (decimal units, as bitrates are quoted).
        static func bytes(_ value: Double) -> String {
            let units: [(Double, String)] = [(1e9, "GB"), (1e6, "MB"), (1e3, "kB")]
            for (size, name) in units where value >= size {
                let scaled = value / size
                let whole = scaled >= 10 || scaled == scaled.rounded()
                return whole ? String(format: "%.0f %@", scaled, name) : String(format: "%.1f %@", scaled, name)
            }
            return String(format: "%.0f B", value)
        }
    }

    /// One panel: a title and its bars, top to bottom.
    struct Panel {
        var title: String
        var scale: Scale
        var unit: Unit
        var bars: [Bar]
    }

    var title: String
    var subtitle: String?
    var panels: [Panel]
    /// Width of the image in pixels; the height follows from the number of bars.
    var width = 1200

    // MARK: Layout

    /// Where everything goes, in pixels.
    struct Layout {
        struct PanelLayout {
            var titleBaseline: Float
            /// The plotting area: bars start at its left edge.
            var plot: Rect
            /// One rectangle per bar of the panel, the full length of its value (zero width when the
            /// value cannot be drawn, e.g. ≤ 0 on a log scale).
            var bars: [Rect]
            /// The value at the plot's left and right edges (log10 of them for a log scale).
            var domain: ClosedRange<Double>
            var ticks: [Double]
            var minorTicks: [Double]
        }
        var width: Int
        var height: Int
        var labelColumn: Float
        var panels: [PanelLayout]
    }

    static let margin: Float = 28
    static let barHeight: Float = 24
    static let barGap: Float = 12
    static let labelSize: Float = 14
    static let valueSize: Float = 13
    static let tickSize: Float = 12
    static let panelTitleSize: Float = 17

    /// Lays the chart out; `measure` gives the width of text at a size.
    func layout(measure: (String, Float) -> Float) -> Layout {
        let margin = Self.margin
        let widest = panels.flatMap(\.bars).map { measure($0.label, Self.labelSize) }.max() ?? 0
        let labelColumn = min(widest + 16, Float(width) * 0.4)
        let widestValue = panels.flatMap { panel in panel.bars.map { measure(valueText(of: $0, unit: panel.unit), Self.valueSize) } }.max() ?? 0
        let plotLeft = margin + labelColumn
        let plotRight = Float(width) - margin - min(widestValue + 12, Float(width) * 0.3)
        var y: Float = subtitle == nil ? 92 : 112
        var layouts: [Layout.PanelLayout] = []
        for panel in panels {
            let titleBaseline = y
            y += 16
            let plotHeight = Float(max(panel.bars.count, 1)) * (Self.barHeight + Self.barGap) + Self.barGap
            let plot = Rect(x: plotLeft, y: y, width: max(plotRight - plotLeft, 1), height: plotHeight)
            let (domain, ticks, minor) = Self.axis(for: panel)
            var bars: [Rect] = []
            for (index, bar) in panel.bars.enumerated() {
                let top = plot.y + Self.barGap + Float(index) * (Self.barHeight + Self.barGap)
                let length = Self.position(bar.value, scale: panel.scale, domain: domain).map { Float($0) * plot.width } ?? 0
                bars.append(Rect(x: plot.x, y: top, width: max(length, 0), height: Self.barHeight))
            }
            layouts.append(Layout.PanelLayout(titleBaseline: titleBaseline, plot: plot, bars: bars, domain: domain,
                                              ticks: ticks, minorTicks: minor))
            y += plotHeight + 64
        }
        return Layout(width: width, height: Int(y.rounded(.up)), labelColumn: labelColumn, panels: layouts)
    }

    /// Where `value` falls across the plot, 0…1; nil when it cannot be drawn on this scale.
    static func position(_ value: Double, scale: Scale, domain: ClosedRange<Double>) -> Double? {
        guard value.isFinite else { return nil }
        let span = domain.upperBound - domain.lowerBound
        guard span > 0 else { return nil }
        switch scale {
        case .linear:
            return min(max((value - domain.lowerBound) / span, 0), 1)
        case .logarithmic:
            guard value > 0 else { return nil }
            return min(max((log10(value) - domain.lowerBound) / span, 0), 1)
        }
    }

    /// The axis of a panel: its domain, major ticks and (log scale) minor ticks, in the scale's terms.
    static func axis(for panel: Panel) -> (domain: ClosedRange<Double>, ticks: [Double], minor: [Double]) {
        let values = panel.bars.flatMap { [$0.value] + ($0.low.map { [$0] } ?? []) }.filter { $0.isFinite }
        switch panel.scale {
        case .linear:
            let top = max(values.max() ?? 1, 0)
            guard top > 0 else { return (0...1, [0, 0.5, 1], []) }
            // A 1-2-5 step giving at most 5 intervals, so that the tick labels do not touch.
            let magnitude = pow(10, floor(log10(top / 5)))
            let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { top / $0 <= 5 } ?? 10 * magnitude
            let upper = (top / step).rounded(.up) * step
            let ticks = stride(from: 0, through: upper + step / 2, by: step).map { $0 }
            return (0...upper, ticks, [])
        case .logarithmic:
            let positive = values.filter { $0 > 0 }
            guard let low = positive.min(), let high = positive.max() else { return (0...1, [1, 10], []) }
            // A decade below the smallest value, so that its bar has a visible length.
            let lower = floor(log10(low)) - 1, upper = max(ceil(log10(high)), lower + 1)
            let ticks = stride(from: lower, through: upper, by: 1).map { $0 }
            let minor = ticks.dropLast().flatMap { decade in (2...9).map { decade + log10(Double($0)) } }
            return (lower...upper, ticks, minor)
        }
    }

    private func valueText(of bar: Bar, unit: Unit) -> String {
        if let text = bar.valueText { return text }
        guard bar.value.isFinite else { return "n/a" }
        if let low = bar.low { return unit.format(low, bar.value) }
        return unit.format(bar.value)
    }

    // MARK: Drawing

    static let veilColor = Color(rgb8: 230, 110, 20)
    static let otherColor = Color(rgb8: 86, 112, 150)
    static let quotedColor = Color(rgb8: 150, 150, 150)
    static let inkColor = Color(rgb8: 30, 33, 40)
    static let mutedInk = Color(rgb8: 95, 100, 110)
    static let gridColor = Color(rgb8: 222, 225, 230)
    static let backgroundColor = Color(white: 1)

    /// Draws the chart on a new canvas of `width` × the laid-out height; also returns the layout.
    func render() throws -> (canvas: CairoCanvas, layout: Layout) {
        let measuring = try CairoCanvas(width: 8, height: 8)
        let layout = layout { text, size in measuring.textWidth(text, size: size) ?? Float(text.count) * size * 0.6 }
        let canvas = try CairoCanvas(width: layout.width, height: layout.height)
        draw(layout, on: canvas)
        return (canvas, layout)
    }

    /// Renders and writes the chart as a PNG file at `path`.
    public func writePNG(to path: String) throws {
        try render().canvas.writePNG(to: path)
    }

    private func draw(_ layout: Layout, on canvas: Canvas) {
        canvas.clear(Self.backgroundColor)
        canvas.drawText(title, at: Point2(Self.margin, 44), size: 24, color: Self.inkColor)
        if let subtitle {
            canvas.drawText(subtitle, at: Point2(Self.margin, 70), size: 13, color: Self.mutedInk)
        }
        drawLegend(on: canvas, right: Float(layout.width) - Self.margin, baseline: 44)
        for (panel, placed) in zip(panels, layout.panels) {
            drawPanel(panel, placed, on: canvas, labelColumn: layout.labelColumn)
        }
    }

    /// The kinds of bar the chart has, right-aligned at `right`.
    private func drawLegend(on canvas: Canvas, right: Float, baseline: Float) {
        let bars = panels.flatMap(\.bars)
        var entries: [(String, Color, Bool)] = []
        if bars.contains(where: \.isVeil) { entries.append(("Veil", Self.veilColor, false)) }
        if bars.contains(where: { !$0.isVeil && !$0.isQuoted }) { entries.append(("others, measured here", Self.otherColor, false)) }
        if bars.contains(where: { !$0.isVeil && $0.isQuoted }) { entries.append(("quoted, not measured", Self.quotedColor, true)) }
        var x = right
        for (text, color, hatched) in entries.reversed() {
            let textWidth = canvas.textWidth(text, size: 13) ?? 0
            x -= textWidth
            canvas.drawText(text, at: Point2(x, baseline), size: 13, color: Self.inkColor)
            x -= 20
            let swatch = Rect(x: x, y: baseline - 12, width: 14, height: 14)
            fillBar(swatch, color: color, hatched: hatched, on: canvas)
            x -= 22
        }
    }

    private func drawPanel(_ panel: Panel, _ placed: Layout.PanelLayout, on canvas: Canvas, labelColumn: Float) {
        let plot = placed.plot
        canvas.drawText(panel.title, at: Point2(Self.margin, placed.titleBaseline), size: Self.panelTitleSize, color: Self.inkColor)
        let span = placed.domain.upperBound - placed.domain.lowerBound
        func x(_ tick: Double) -> Float { plot.x + Float((tick - placed.domain.lowerBound) / span) * plot.width }

        // Grid, then the axis line and tick labels below the plot.
        for tick in placed.minorTicks {
            canvas.move(to: Point2(x(tick).rounded() + 0.5, plot.y)); canvas.line(to: Point2(x(tick).rounded() + 0.5, plot.y + plot.height))
        }
        canvas.strokePath(Self.gridColor.withAlpha(0.5), style: StrokeStyle(width: 1, cap: .butt))
        for tick in placed.ticks {
            canvas.move(to: Point2(x(tick).rounded() + 0.5, plot.y)); canvas.line(to: Point2(x(tick).rounded() + 0.5, plot.y + plot.height + 5))
        }
        canvas.strokePath(Self.gridColor.mixed(with: Self.mutedInk, 0.25), style: StrokeStyle(width: 1, cap: .butt))
        canvas.move(to: Point2(plot.x, plot.y + plot.height + 0.5)); canvas.line(to: Point2(plot.x + plot.width, plot.y + plot.height + 0.5))
        canvas.strokePath(Self.mutedInk, style: StrokeStyle(width: 1, cap: .butt))
        for tick in placed.ticks {
            let value = panel.scale == .logarithmic ? pow(10, tick) : tick
            let text = panel.unit.tick(value)
            let textWidth = canvas.textWidth(text, size: Self.tickSize) ?? 0
            canvas.drawText(text, at: Point2(x(tick) - textWidth / 2, plot.y + plot.height + 22), size: Self.tickSize, color: Self.mutedInk)
        }
        if panel.scale == .logarithmic {
            let note = "log scale"
            let noteWidth = canvas.textWidth(note, size: Self.tickSize) ?? 0
            canvas.drawText(note, at: Point2(plot.x + plot.width - noteWidth, placed.titleBaseline), size: Self.tickSize, color: Self.mutedInk)
        }

        for (bar, rect) in zip(panel.bars, placed.bars) {
            let baseline = rect.y + rect.height / 2 + Self.labelSize * 0.36
            let labelWidth = canvas.textWidth(bar.label, size: Self.labelSize) ?? 0
            canvas.drawText(bar.label, at: Point2(plot.x - 12 - labelWidth, baseline), size: Self.labelSize,
                            color: bar.isVeil ? Self.veilColor.mixed(with: Self.inkColor, 0.35) : Self.inkColor)
            let color = bar.isVeil ? Self.veilColor : (bar.isQuoted ? Self.quotedColor : Self.otherColor)
            if let low = bar.low, let lowPosition = Self.position(low, scale: panel.scale, domain: placed.domain) {
                let solid = Float(lowPosition) * plot.width
                fillBar(Rect(x: rect.x, y: rect.y, width: min(solid, rect.width), height: rect.height), color: color, hatched: bar.isQuoted, on: canvas)
                if rect.width > solid {
                    fillBar(Rect(x: rect.x + solid, y: rect.y, width: rect.width - solid, height: rect.height),
                            color: color.mixed(with: Self.backgroundColor, 0.55), hatched: bar.isQuoted, on: canvas)
                }
            } else {
                fillBar(rect, color: color, hatched: bar.isQuoted, on: canvas)
            }
            let text = valueText(of: bar, unit: panel.unit)
            canvas.drawText(text, at: Point2(rect.x + rect.width + 8, rect.y + rect.height / 2 + Self.valueSize * 0.36),
                            size: Self.valueSize, color: bar.isVeil ? Self.veilColor.mixed(with: Self.inkColor, 0.35) : Self.mutedInk)
        }
    }

    /// A bar: solid, or (quoted) a light fill with diagonal hatching.
    private func fillBar(_ rect: Rect, color: Color, hatched: Bool, on canvas: Canvas) {
        guard rect.width > 0, rect.height > 0 else { return }
        canvas.addRect(rect)
        if !hatched {
            canvas.fillPath(color)
            return
        }
        canvas.fillPath(color.mixed(with: Self.backgroundColor, 0.6))
        canvas.withSavedState {
            canvas.clip(to: rect)
            var x = rect.x - rect.height
            while x < rect.x + rect.width {
                canvas.move(to: Point2(x, rect.y + rect.height)); canvas.line(to: Point2(x + rect.height, rect.y))
                x += 6
            }
            canvas.strokePath(color, style: StrokeStyle(width: 1.5, cap: .butt))
        }
    }
}

// MARK: - From a bench report

extension BenchReport {
    /// The chart of this run: milliseconds per frame (tracking and drawing) and bytes per second
    /// (the bandwidth comparison, when measured).
    public var chart: BenchChart {
        var speed: [BenchChart.Bar] = [
            BenchChart.Bar(label: "Veil: track → wire bytes", value: tracking.total.p50, isVeil: true),
        ]
        // The peers on the same frames (landmarks only, so Veil's bar is its tracker call too).
        if let peers {
            for row in peers.rows where row.id != "veil" && row.unavailable == nil && row.milliseconds.count > 0 {
                let short = ["dlib": "dlib (face_recognition's way)", "mediapipe": "MediaPipe Python",
                             "mediapipe-refined": "MediaPipe Python, refined", "veil-attention": "Veil, attention mesh", "veil-mesh-iris": "Veil, mesh + iris"][row.id] ?? row.id
                speed.append(BenchChart.Bar(label: "\(short): track → landmarks", value: row.milliseconds.p50, isVeil: row.id.hasPrefix("veil")))
            }
        }
        for r in rendering {
            speed.append(BenchChart.Bar(label: "Veil: draw avatar (\(r.style))", value: r.milliseconds.p50, isVeil: true))
        }
        // dlib is ~30× Veil: a linear axis would flatten every other bar.
        let values = speed.map(\.value).filter { $0 > 0 }
        let wide = (values.max() ?? 1) / (values.min() ?? 1) > 20
        var panels = [BenchChart.Panel(title: "Milliseconds per frame, median, one core",
                                       scale: wide ? .logarithmic : .linear, unit: .millisecondsPerFrame, bars: speed)]
        if let bandwidth {
            let unit = BenchChart.Unit.bytesPerSecond
            let veil = bandwidth.veil?.payloadBytesPerSecond ?? 0
            // "× Veil" against Veil's payload, whole numbers from 10 on.
            func times(_ value: Double) -> String {
                let ratio = value / veil
                return ratio >= 10 ? String(format: "%.0f×", ratio) : String(format: "%.1f×", ratio)
            }
            func bar(_ label: String, _ value: Double) -> BenchChart.Bar {
                BenchChart.Bar(label: label, value: value, isVeil: false,
                               valueText: veil > 0 ? "\(unit.format(value)) · \(times(value)) Veil" : nil)
            }
            var bars: [BenchChart.Bar] = []
            for stream in bandwidth.streams {
                if stream.isVeil {
                    bars.append(BenchChart.Bar(label: stream.name, value: stream.payloadBytesPerSecond, isVeil: true))
                    bars.append(BenchChart.Bar(label: "\(stream.name), on the wire", value: stream.wireBytesPerSecond, isVeil: true))
                } else {
                    bars.append(bar(stream.name, stream.payloadBytesPerSecond))
                }
            }
            if let call, !call.directions.isEmpty {
                let audio = call.directions.map(\.audioBytesPerSecond).reduce(0, +) / Double(call.directions.count)
                bars.append(bar("Opus voice (in the call)", audio))
            }
            for quoted in bandwidth.quoted {
                let low = quoted.lowBitsPerSecond / 8, high = quoted.highBitsPerSecond / 8
                bars.append(BenchChart.Bar(label: quoted.name, value: high, isVeil: false, isQuoted: true, low: low,
                                           valueText: veil > 0 ? "\(unit.format(low, high)) · \(times(low))–\(times(high)) Veil" : nil))
            }
            panels.append(BenchChart.Panel(title: "Bytes per second for the same clips (payload)", scale: .logarithmic,
                                           unit: .bytesPerSecond, bars: bars))
        }
        if let latency, !latency.veil.isEmpty || !latency.chromium.isEmpty {
            // Mouth to ear per network condition, Veil beside Chromium (libwebrtc's NetEq).
            var bars: [BenchChart.Bar] = []
            for condition in latency.schedule {
                if let veil = latency.veil.first(where: { $0.condition.name == condition.name })?.mouthToEarPercentile(50) {
                    bars.append(BenchChart.Bar(label: "Veil: \(condition.name)", value: veil, isVeil: true))
                }
                if let chromium = latency.chromium.first(where: { $0.condition.name == condition.name })?.mouthToEarPercentile(50) {
                    bars.append(BenchChart.Bar(label: "Chromium: \(condition.name)", value: chromium, isVeil: false))
                }
            }
            panels.append(BenchChart.Panel(title: "Mouth to ear through the relay, median", scale: .linear, unit: .milliseconds, bars: bars))
        }
        if let load = clusterLoad, load.joined > 0 {
            // Joins take a round trip to Redis and back; relays one publish: a linear axis could hide the latter.
            let bars = [("join", load.joinMilliseconds), ("relay across nodes", load.relay.crossNode), ("relay on one node", load.relay.sameNode)]
                .filter { $0.1.count > 0 }
                .flatMap { name, stats in
                    [BenchChart.Bar(label: "\(name), p50", value: stats.p50, isVeil: true),
                     BenchChart.Bar(label: "\(name), p95", value: stats.p95, isVeil: true)]
                }
            let values = bars.map(\.value).filter { $0 > 0 }
            let wide = (values.max() ?? 1) / (values.min() ?? 1) > 20
            panels.append(BenchChart.Panel(title: "Room service: \(load.nodes) nodes behind haproxy, \(load.joined) clients",
                                           scale: wide ? .logarithmic : .linear, unit: .milliseconds, bars: bars))
        }
        let subtitle = "\(date.prefix(10)) · \(machine.cpuModel ?? "unknown CPU"), \(machine.logicalCores) cores · "
            + "\(tracking.frames) frames of \(photos.joined(separator: " and ")) at \(width)×\(height)"
        return BenchChart(title: "veil bench", subtitle: subtitle, panels: panels)
    }
}
