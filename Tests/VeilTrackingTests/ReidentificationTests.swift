import Foundation
import Synchronization
import XCTest
@testable import VeilCore
@testable import VeilVision
import VeilSynth
@testable import VeilTracking

/// The regression guard of the re-identification experiment: a short version, run by `make test`,
/// that keeps today's filter from getting worse on the five faces it was tuned on. It is not the
/// measure of the privacy claim: that is `make privacy` (privacy/attack.py, docs/privacy.md), with
/// more people, a quarter of them held out, minute-long sessions and attackers that use them whole.
///
/// Can a nearest-neighbour classifier tell who is on camera from what Veil transmits, and from the
/// raw landmarks that the approach Veil replaces transmitted?
///
/// Each photo in Veil's cache (five different people) is animated by `TalkingFaceSynthesizer` in
/// two independent sessions, and the whole experiment runs `experiments` times, pooled. A session
/// is a fresh `ExpressionCapture` (so a fresh neutral calibration) fed a random performance: a
/// warm-up during which the estimator calibrates, then one-second segments, each drawn from the
/// same random distribution of speech, blinks, smiles, brow raises and head turns with its own
/// seed. What is said and done therefore differs from
/// segment to segment and from person to person while following the same statistics for all.
///
/// Per segment two feature vectors are taken:
/// - the transmitted stream: every frame's wire bytes, as Veil sends them by default (through
///   `ExpressionPrivacy` at `PrivacyLevel.default`), decoded back into an `ExpressionFrame`, then per-coefficient mean
///   and standard deviation over the segment, the same for head pose (yaw, pitch, roll) and gaze
///   (x, y): 114 values; the same without the filter (`--full-expression`) beside it;
/// - the raw landmarks: the tracker's mesh in 2-D (478 points with the attention mesh, 468 with
///   `Options.meshAndIris`), translated to its centroid and scaled to unit RMS radius, averaged over
///   the segment: 956 or 936 values.
///
/// A 1-nearest-neighbour classifier (Euclidean distance on features standardised with the
/// training set's mean and deviation) is trained on one session of every person and tested on the
/// other session of the same experiment, both ways round. Testing on another session is what an adversary holding an
/// earlier recording of a person would do; it also keeps artefacts of one session's calibration
/// (which link segments of the same call together, not to a person) from counting as identity.
/// Leave-one-segment-out within each experiment is reported beside it for comparison. A stronger
/// adversary is reported too: `LogisticRegressionAdversary`, trained on the first session of
/// every person in all runs at once and tested on the second sessions, and the other way round.
///
/// Everything is seeded: the run is deterministic, so the statistical bound below is checked
/// against one fixed sample, not re-drawn on every run. With VEIL_REID_SEED_OFFSET=N the runs are
/// drawn as runs N, N + 1, … would be: other samples of the same experiment (docs/privacy.md has
/// the figures of two; the guards below hold for the default sample).
final class ReidentificationTests: XCTestCase {
    /// Photos in Veil's cache, one person each.
    static let photos = ["astronaut.png", "takeo.ppm", "breakingbad.jpg", "einstein.jpg", "lenna.png"]
    static let sessionsPerPerson = 2
    static let segmentsPerSession = 12
    /// Independent runs of the whole experiment (their own performances), pooled. Predictions
    /// within a run are correlated (they share sessions and calibrations), so runs vary more than
    /// a binomial count would: three runs at a time gave 22.5, 22.2 and 29.4 % with one filter.
    static let experiments = 9
    static let framesPerSecond = 30.0
    /// Seconds at the start of each session: the estimator's 45-frame calibration, then a margin.
    static let warmUpSeconds = 2.0
    static let segmentSeconds = 1.0

    /// One segment of one session of one person.
    struct Segment {
        var person: Int
        /// Sessions are numbered across experiments (`sessionsPerPerson` to each); a classifier
        /// only sees one experiment.
        var session: Int
        var index: Int
        /// Features of the decoded ExpressionFrames as Veil sends them by default (estimator, then
        /// `ExpressionPrivacy` at the default level).
        var stream: [Double]
        /// The same without the privacy filter (`veil call --full-expression`).
        var fullExpressionStream: [Double] = []
        /// Features of the tracker's raw landmarks.
        var landmarks: [Double]
        /// Diagnostic: stream features when the estimator reads the synthesiser's exact mesh instead
        /// of the tracker's (no tracking error; no pupils, so no gaze).
        var exactMeshStream: [Double] = []
        /// The same through the privacy filter.
        var exactMeshFilteredStream: [Double] = []
        /// Diagnostic: the default stream with the channels the script performs (jaw, blinks,
        /// smile, brows, yaw) replaced by what it performed: what would still name people if those
        /// were read perfectly on every face.
        var performedChannelsStream: [Double] = []
        /// Control: the performance alone, everything else at rest, over the same frames. It is
        /// drawn from the same statistics for everyone, so it names people only by chance; its
        /// figure is this sample's floor.
        var performanceStream: [Double] = []
        /// Scripted mean jaw drop and head yaw, and the stream's mean jawOpen and yaw, for the check
        /// that the stream does carry the performance.
        var scriptedJaw: Double, streamJaw: Double, scriptedYaw: Double, streamYaw: Double
        /// Which run of the experiment the segment belongs to.
        var experiment: Int { session / ReidentificationTests.sessionsPerPerson }
    }

    /// Named ranges of the stream's feature vector, for the per-part breakdown.
    static let streamParts: [(name: String, range: Range<Int>)] = {
        let c = BlendShape.allCases.count
        return [("coefficient means", 0..<c), ("coefficient deviations", c..<2 * c),
                ("head pose", 2 * c..<2 * c + 6), ("gaze", 2 * c + 6..<2 * c + 10)]
    }()

    /// The coefficients each scripted action mainly drives, for the per-channel breakdown.
    static let channels: [(name: String, shapes: [BlendShape])] = [
        ("jawOpen", [.jawOpen]), ("eyeBlink", [.eyeBlinkLeft, .eyeBlinkRight]),
        ("mouthSmile", [.mouthSmileLeft, .mouthSmileRight]), ("brows up", [.browInnerUp, .browOuterUpLeft, .browOuterUpRight]),
        ("mouthFrown", [.mouthFrownLeft, .mouthFrownRight]), ("mouthPucker", [.mouthPucker]), ("mouthFunnel", [.mouthFunnel]),
    ]

    nonisolated(unsafe) static var cachedSegments: [Segment]?

    // MARK: - The tests

    /// The privacy claim: from the decoded stream of one session, a nearest-neighbour classifier
    /// trained on another session of every person names the person no more often than chance
    /// allows (one-sided binomial 95 % bound for the number of predictions); see the assertions
    /// for where it stands. Prints the whole experiment, with a breakdown by part of the stream
    /// and the confusion matrix.
    func testHowWellTheTransmittedStreamIdentifiesPeople() throws {
        let segments = try Self.segments()
        let people = Set(segments.map(\.person)).count
        let chance = 1.0 / Double(people)
        let matching = Self.matchingChance(segments, \.stream)
        let stream = matching.score
        let landmarks = Self.crossSessionAccuracy(segments, \.landmarks)
        let fullExpression = Self.crossSessionAccuracy(segments, \.fullExpressionStream)
        let bound = Self.binomialUpperQuantile(trials: stream.total, probability: chance, level: 0.95)
        let pooled = Self.pooledSessionChance(segments, \.stream)
        let pooledFull = Self.pooledSessionChance(segments, \.fullExpressionStream)
        let streamLOO = Self.leaveOneOutAccuracy(segments, \.stream)
        let landmarkLOO = Self.leaveOneOutAccuracy(segments, \.landmarks)

        print("re-identification: \(people) people, \(segments.count) segments of \(Self.segmentSeconds) s, chance \(Self.percent(chance))")
        print("  train on one session, test on the other (both ways), \(stream.total) predictions:")
        print("    Veil stream:   \(stream.correct)/\(stream.total) = \(Self.percent(stream.accuracy))"
              + " (chance + binomial 95 % bound: ≤ \(bound) correct = \(Self.percent(Double(bound) / Double(stream.total))))")
        print("      against matchings of the sessions' people drawn at random (the chance that keeps each session's predictions together):"
              + " 95 % bound ≤ \(matching.bound) correct = \(Self.percent(Double(matching.bound) / Double(stream.total)));"
              + " P(≥ \(stream.correct) by chance) = \(String(format: "%.4f", matching.probability))")
        print("    raw landmarks: \(landmarks.correct)/\(landmarks.total) = \(Self.percent(landmarks.accuracy))")
        print("    Veil stream without the privacy filter (--full-expression): \(fullExpression.correct)/\(fullExpression.total) = \(Self.percent(fullExpression.accuracy))")
        print("  a stronger adversary: logistic regression trained on the first session of every person in all \(Self.experiments) runs at once, tested on the second sessions, and the other way round, \(pooled.score.total) predictions:")
        print("    Veil stream:   \(pooled.score.correct)/\(pooled.score.total) = \(Self.percent(pooled.score.accuracy))"
              + " (95 % bound under random matchings of each test session's people: ≤ \(pooled.bound) correct = \(Self.percent(Double(pooled.bound) / Double(pooled.score.total)));"
              + " P(≥ \(pooled.score.correct) by chance) = \(String(format: "%.4f", pooled.probability)))")
        print("    Veil stream without the privacy filter (--full-expression): \(pooledFull.score.correct)/\(pooledFull.score.total) = \(Self.percent(pooledFull.score.accuracy))")
        print("  leave one segment out, \(streamLOO.total) predictions (same-session neighbours allowed):")
        print("    Veil stream:   \(streamLOO.correct)/\(streamLOO.total) = \(Self.percent(streamLOO.accuracy))")
        print("    raw landmarks: \(landmarkLOO.correct)/\(landmarkLOO.total) = \(Self.percent(landmarkLOO.accuracy))")
        print("  the stream by part, cross-session / the stronger adversary:")
        for part in Self.streamParts {
            let cross = Self.crossSessionAccuracy(segments) { Array($0.stream[part.range]) }
            let strong = Self.pooledSessionScore(segments) { Array($0.stream[part.range]) }
            print("    \(part.name): \(Self.percent(cross.accuracy)) / \(Self.percent(strong.accuracy))")
        }
        for (name, shapes) in Self.channels {
            let columns = shapes.flatMap { [$0.rawValue, BlendShape.allCases.count + $0.rawValue] }
            let cross = Self.crossSessionAccuracy(segments) { s in columns.map { s.stream[$0] } }
            let strong = Self.pooledSessionScore(segments) { s in columns.map { s.stream[$0] } }
            print("    \(name) alone (mean and deviation): \(Self.percent(cross.accuracy)) / \(Self.percent(strong.accuracy))")
        }
        let exact = Self.crossSessionAccuracy(segments, \.exactMeshStream)
        let exactFiltered = Self.crossSessionAccuracy(segments, \.exactMeshFilteredStream)
        print("  diagnostic, the estimator on the synthesiser's exact mesh (no tracker, no gaze): \(Self.percent(exactFiltered.accuracy))"
              + " with the privacy filter, \(Self.percent(exact.accuracy)) without")
        for part in Self.streamParts.prefix(3) {
            let cross = Self.crossSessionAccuracy(segments) { Array($0.exactMeshStream[part.range]) }
            print("    \(part.name): \(Self.percent(cross.accuracy))")
        }
        let performedChannels = Self.crossSessionAccuracy(segments, \.performedChannelsStream)
        let performanceChance = Self.matchingChance(segments, \.performanceStream)
        let performance = performanceChance.score
        print("  diagnostic, the stream with jaw, blinks, smile, brows and yaw as performed (read perfectly on every face):"
              + " \(performedChannels.correct)/\(performedChannels.total) = \(Self.percent(performedChannels.accuracy))")
        print("  control, the performance alone: \(performance.correct)/\(performance.total) = \(Self.percent(performance.accuracy))"
              + " (bound \(performanceChance.bound), P = \(String(format: "%.4f", performanceChance.probability))): this sample's floor")
        print("  confusion of the stream, cross-session (rows: true person, columns: predicted):")
        for (row, name) in zip(Self.crossSessionConfusion(segments, \.stream), Self.photos) {
            print("    \(name.padding(toLength: 16, withPad: " ", startingAt: 0)) \(row.map { String(format: "%3d", $0) }.joined(separator: " "))")
        }

        XCTAssertGreaterThanOrEqual(people, 4, "the experiment needs at least four people")
        // The claim is no better than chance: `stream.correct` within the 95 % bound of random
        // matchings (`permutationNullDistribution`; the binomial bound, which treats every
        // prediction as independent, is a little stricter), and the same for the stronger
        // adversary. The last run, with the attention mesh as the default tracker and the strict
        // level (its own blinks seeded per session, so the figure is the same on every run):
        // 255 / 1080 (23.6 %) against a bound of 244, P = 0.012, and the stronger adversary 275
        // (25.5 %) against 244: a little above chance for both. The two-model pipeline
        // (VEIL_REID_TRACKER=two-models) reads 258 (23.9 %, bound 246, P = 0.013) and 249 (23.1 %,
        // bound 242, P = 0.022); with the attention mesh's refined lips used on every face size, the
        // stronger adversary read 30.0 %, nearly all of it from einstein's smiles
        // (`AttentionMeshModel.lipRefinementEyeDistances`). With the two-model pipeline (the figures
        // below): with unseeded blinks two runs read 23.0 and 24.1 %, the
        // first within chance; through the filter alone (the standard
        // level) 252 (23.3 %, P = 0.025) and 264 (24.4 %); an earlier release 24.7 %. Other samples of nine runs (VEIL_REID_SEED_OFFSET) differ by
        // several points: runs 9–17 are within chance for both adversaries (21.1 and 21.1 %), runs
        // 18–26 are not (24.8 and 27.9 %). Without the privacy filter 70.5 % and 91.3 %. What is
        // left is spread thinly (no channel alone above 22.5 % to either adversary): faces whose
        // mouth, blinks and head pose the landmark model reads with different strength and
        // cross-talk (docs/privacy.md). Until that is closed this guards the measured state.
        XCTAssertLessThanOrEqual(pooled.score.accuracy, 0.26,
                                 "the stronger adversary identifies people more often: \(Self.percent(pooled.score.accuracy)) (last measured 25.5 %)")
        XCTAssertGreaterThan(pooledFull.score.accuracy, pooled.score.accuracy + 0.5, "the privacy filter no longer stops the stronger adversary")
        XCTAssertLessThan(stream.accuracy, landmarks.accuracy - 0.5, "the stream identifies people almost as well as raw landmarks")
        XCTAssertLessThanOrEqual(stream.accuracy, 0.245,
                                 "the transmitted stream became more identifying: \(Self.percent(stream.accuracy)) (last measured 23.6 %; chance \(Self.percent(chance)), bound \(bound) correct)")
        XCTAssertGreaterThan(fullExpression.accuracy, stream.accuracy + 0.3, "the privacy filter no longer lowers re-identification much")
        XCTAssertLessThan(exactFiltered.accuracy, exact.accuracy, "on the exact mesh, the privacy filter no longer lowers re-identification")
        // The performances are drawn from the same statistics for everyone: if they named people,
        // the experiment itself would leak identity.
        XCTAssertLessThanOrEqual(performance.correct, performanceChance.bound,
                                 "the performances alone identify people: \(Self.percent(performance.accuracy))")
    }

    /// The same experiment with every face presented at one size (180 pixels wide in 640×480,
    /// about a face at arm's length from a laptop camera): how much of what identifies people in
    /// the main experiment comes from their faces' very different sizes there (46–197 pixels).
    /// The last run (the attention mesh, the strict level, its blinks seeded per session): 232 / 1080
    /// (21.5 %; bound 243 under random matchings and 238 binomial, P = 0.17: within chance), the
    /// stronger adversary 297 (27.5 %). With the two-model pipeline 271 (25.1 %; bound 251, P = 0.006:
    /// above chance) and 300 (27.8 %); the filter alone
    /// 273 (25.3 %) and 331 (30.6 %); without the privacy filter
    /// 70.4 %; the previous release 26.7 % on the same nine runs. This is where the stream still
    /// carries the most: the stronger adversary names the person 31–33 % of the time on all three
    /// samples measured (docs/privacy.md).
    func testFacesOfOneSize() throws {
        if Self.cachedSameSizeSegments == nil { Self.cachedSameSizeSegments = try Self.segments(faceWidth: 180) }
        let segments = Self.cachedSameSizeSegments!
        let matching = Self.matchingChance(segments, \.stream)
        let stream = matching.score
        let full = Self.crossSessionAccuracy(segments, \.fullExpressionStream)
        let landmarks = Self.crossSessionAccuracy(segments, \.landmarks)
        let bound = Self.binomialUpperQuantile(trials: stream.total, probability: 0.2, level: 0.95)
        let pooled = Self.pooledSessionChance(segments, \.stream)
        print("re-identification, every face 180 px wide: Veil stream \(stream.correct)/\(stream.total) = \(Self.percent(stream.accuracy))"
              + " (binomial bound \(bound), matching bound \(matching.bound),"
              + " P(≥ \(stream.correct) by chance) = \(String(format: "%.4f", matching.probability))); without the privacy filter \(Self.percent(full.accuracy)); raw landmarks \(Self.percent(landmarks.accuracy))")
        print("  the stronger adversary (logistic regression on all runs' first sessions, tested on the second, and back): \(pooled.score.correct)/\(pooled.score.total) = \(Self.percent(pooled.score.accuracy))"
              + " (bound \(pooled.bound), P = \(String(format: "%.4f", pooled.probability)))")
        let performedChannels = Self.crossSessionAccuracy(segments, \.performedChannelsStream)
        let performance = Self.crossSessionAccuracy(segments, \.performanceStream)
        print("  diagnostic, jaw, blinks, smile, brows and yaw as performed: \(Self.percent(performedChannels.accuracy)); the performance alone: \(Self.percent(performance.accuracy))")
        XCTAssertGreaterThanOrEqual(landmarks.accuracy, 0.9, "raw landmarks should still identify people")
        XCTAssertLessThan(stream.accuracy, full.accuracy - 0.3, "the privacy filter should lower re-identification here too")
        XCTAssertLessThanOrEqual(stream.accuracy, 0.265, "faces of one size became more identifiable: \(Self.percent(stream.accuracy)) (last measured 21.5 %)")
        XCTAssertLessThanOrEqual(pooled.score.accuracy, 0.32,
                                 "at one size the stronger adversary identifies people more often: \(Self.percent(pooled.score.accuracy)) (last measured 27.5 %)")
    }

    /// The comparison: the same classifier on the raw landmarks the replaced approach sent.
    func testRawLandmarksIdentifyPeople() throws {
        let segments = try Self.segments()
        let landmarks = Self.crossSessionAccuracy(segments, \.landmarks)
        print("re-identification from raw landmarks, cross-session: \(landmarks.correct)/\(landmarks.total) = \(Self.percent(landmarks.accuracy))")
        XCTAssertGreaterThanOrEqual(Set(segments.map(\.person)).count, 4, "the experiment needs at least four people")
        XCTAssertGreaterThanOrEqual(landmarks.accuracy, 0.9, "raw landmarks should identify people reliably")
    }

    /// The control that makes the headline mean something: the stream is not blank or noise; for
    /// every person, the segments' mean jawOpen follows the script's mean jaw drop. Also prints,
    /// per person, how strongly jawOpen and yaw respond to the same scripted movement (the slope of
    /// stream against script over the segments) and how well yaw follows.
    func testTheStreamCarriesThePerformance() throws {
        let segments = try Self.segments()
        for (person, photo) in Self.photos.enumerated() {
            let mine = segments.filter { $0.person == person }
            let jaw = pearsonCorrelation(mine.map(\.scriptedJaw), mine.map(\.streamJaw))
            let yaw = pearsonCorrelation(mine.map(\.scriptedYaw), mine.map(\.streamYaw))
            let jawSlope = Self.slope(mine.map(\.scriptedJaw), mine.map(\.streamJaw))
            let yawSlope = Self.slope(mine.map(\.scriptedYaw), mine.map(\.streamYaw))
            print("\(photo): per-segment means, script vs stream: jaw r = \(String(format: "%.2f", jaw)), "
                  + "jawOpen per unit jaw drop \(String(format: "%.2f", jawSlope)); yaw r = \(String(format: "%.2f", yaw)), "
                  + "yaw per scripted degree \(String(format: "%.2f", yawSlope))")
            XCTAssertGreaterThanOrEqual(jaw, 0.6, photo)
        }
    }

    /// The classifier and the statistics on inputs whose answer is known.
    func testClassifierAndBoundOnKnownInputs() {
        // Two well separated clusters are classified perfectly; identical features give chance.
        var separated: [Segment] = [], identical: [Segment] = []
        for person in 0..<2 {
            for session in 0..<2 {
                for index in 0..<5 {
                    let v = [Double(person) * 10 + Double(index) * 0.1, Double(session) * 0.2]
                    separated.append(Segment(person: person, session: session, index: index, stream: v, landmarks: v,
                                             scriptedJaw: 0, streamJaw: 0, scriptedYaw: 0, streamYaw: 0))
                    identical.append(Segment(person: person, session: session, index: index, stream: [1, 2], landmarks: [1, 2],
                                             scriptedJaw: 0, streamJaw: 0, scriptedYaw: 0, streamYaw: 0))
                }
            }
        }
        XCTAssertEqual(Self.crossSessionAccuracy(separated, \.stream).accuracy, 1)
        XCTAssertEqual(Self.leaveOneOutAccuracy(separated, \.stream).accuracy, 1)
        // Ties go to the first training segment, which is person 0: half right.
        XCTAssertEqual(Self.crossSessionAccuracy(identical, \.stream).accuracy, 0.5)
        // Binomial(10, 0.5): P(X ≤ 7) = 0.945, P(X ≤ 8) = 0.989.
        XCTAssertEqual(Self.binomialUpperQuantile(trials: 10, probability: 0.5, level: 0.95), 8)
        // Binomial(120, 0.2): mean 24, sd 4.38; the 95 % quantile is 31.
        XCTAssertEqual(Self.binomialUpperQuantile(trials: 120, probability: 0.2, level: 0.95), 31)
        // One experiment, five people, two segments each, every prediction right both ways: under
        // a random matching, correct = 4 × (people matched to themselves), whose count among the
        // 120 matchings is 44, 45, 20, 10, 0, 1 for 0…5 fixed points.
        let perfect = (0..<5).map { row in (0..<5).map { $0 == row ? 2 : 0 } }
        let null = Self.permutationNullDistribution([0: perfect, 1: perfect])
        XCTAssertEqual(null.count, 21)
        XCTAssertEqual(null[0], 44.0 / 120, accuracy: 1e-12)
        XCTAssertEqual(null[4], 45.0 / 120, accuracy: 1e-12)
        XCTAssertEqual(null[20], 1.0 / 120, accuracy: 1e-12)
        XCTAssertEqual(null.reduce(0, +), 1, accuracy: 1e-12)
        // P(≤ 8) = 109/120 = 0.908, P(≤ 12) = 119/120.
        XCTAssertEqual(Self.upperQuantile(null, level: 0.95), 12)
        // Two experiments: the distributions convolve (mean 2 × 4, all 20s at once 1/120²).
        let two = Self.permutationNullDistribution([0: perfect, 1: perfect, 2: perfect, 3: perfect])
        XCTAssertEqual(two.enumerated().reduce(0) { $0 + Double($1.offset) * $1.element }, 8, accuracy: 1e-9)
        XCTAssertEqual(two[40], 1.0 / 14_400, accuracy: 1e-15)
        // Test sessions matched independently: one session right for all its ten predictions has
        // correct = 2 × fixed points, so 44, 45, 20, 10, 0, 1 of 120 at 0, 2, …, 10.
        let single = Self.independentMatchingNullDistribution([perfect])
        XCTAssertEqual(single.count, 11)
        XCTAssertEqual(single[2], 45.0 / 120, accuracy: 1e-12)
        XCTAssertEqual(single[10], 1.0 / 120, accuracy: 1e-12)
        XCTAssertEqual(Self.independentMatchingNullDistribution([perfect, perfect])[20], 1.0 / 14_400, accuracy: 1e-15)
        // The pooled adversary: perfect on separated clusters, at chance on identical features
        // (everything is one person, right for half the segments, and nothing beyond its bound).
        let pooled = Self.pooledSessionChance(separated, \.stream)
        XCTAssertEqual(pooled.score.accuracy, 1)
        XCTAssertEqual(pooled.score.total, 20)
        let blind = Self.pooledSessionChance(identical, \.stream)
        XCTAssertEqual(blind.score.accuracy, 0.5)
        XCTAssertLessThanOrEqual(blind.score.correct, blind.bound)
        XCTAssertEqual(blind.probability, 1, accuracy: 1e-12, "a blind guess is right for one person in every matching")
    }

    // MARK: - Building the data set

    /// Every segment of every session of every person; computed once per test run.
    static func segments() throws -> [Segment] {
        if let cachedSegments { return cachedSegments }
        cachedSegments = try segments(faceWidth: nil)
        return cachedSegments!
    }

    nonisolated(unsafe) static var cachedSameSizeSegments: [Segment]?

    /// Added to each run's number in its seeds: VEIL_REID_SEED_OFFSET, or 0.
    static var seedOffset: Int { max(Int(ProcessInfo.processInfo.environment["VEIL_REID_SEED_OFFSET"] ?? "") ?? 0, 0) }

    /// The tracker's options: the default pipeline, or with VEIL_REID_TRACKER=attention the attention
    /// mesh, and with VEIL_REID_TRACKER=two-models the 468-point mesh and the iris model, so that both
    /// can be measured by the same experiment whichever is the default.
    static var trackerOptions: MediaPipeFaceTracker.Options {
        var options = MediaPipeFaceTracker.Options()
        switch ProcessInfo.processInfo.environment["VEIL_REID_TRACKER"] {
        case "attention": options.attentionMesh = true
        case "two-models": options.attentionMesh = false
        default: break
        }
        return options
    }

    /// Every segment of every session of every person. With `faceWidth`, each photo is first
    /// cropped around its face so that the face is that many pixels wide in the 640×480 frame, as
    /// faces at a call's usual distance are; without, each photo is letterboxed whole (faces from
    /// 46 to 197 pixels wide).
    static func segments(faceWidth: Float?) throws -> [Segment] {
        // The faces are animated around the 468-point mesh whichever tracker is measured, so that
        // every pipeline is shown the same videos.
        let tracker = try MediaPipeFaceTracker(options: .meshAndIris)
        let topology = try VeilResources.meshTopology()
        var synths: [TalkingFaceSynthesizer] = []
        for photo in photos {
            let original = try Photos.image(photo)
            var (image, scale, offset) = original.letterboxed(width: 640, height: 480)
            tracker.reset()
            guard var mesh = try tracker.landmarks(inStill: image)?.mesh else {
                throw VeilError.invalidInput("no face found in \(photo)")
            }
            if let faceWidth {
                let xs = mesh.map { ($0.x - offset.x) / scale }, ys = mesh.map { ($0.y - offset.y) / scale }
                let width = (xs.max() ?? 0) - (xs.min() ?? 0)
                guard width > 1 else { throw VeilError.invalidInput("degenerate face in \(photo)") }
                let cropWidth = Int((width * 640 / faceWidth).rounded()), cropHeight = cropWidth * 3 / 4
                let centreX = Int(((xs.max()! + xs.min()!) / 2).rounded()), centreY = Int(((ys.max()! + ys.min()!) / 2).rounded())
                image = crop(original, x: centreX - cropWidth / 2, y: centreY - cropHeight / 2, width: cropWidth, height: cropHeight)
                    .letterboxed(width: 640, height: 480).image
                tracker.reset()
                guard let found = try tracker.landmarks(inStill: image)?.mesh else {
                    throw VeilError.invalidInput("no face found in \(photo) cropped to a \(faceWidth)-pixel face")
                }
                mesh = found
            }
            synths.append(try TalkingFaceSynthesizer(photo: image, mesh: mesh, topology: topology))
        }
        // Every session is recorded afresh (a reset tracker, a new capture), so sessions are
        // independent: they run on every core, each worker with a tracker of its own, and are put
        // back in order (person, run, session), so the data set is the same however many cores.
        let sessions = synths.indices.flatMap { person in
            (0..<experiments).flatMap { experiment in (0..<sessionsPerPerson).map { (person: person, experiment: experiment, session: $0) } }
        }
        let recorded = Mutex([[Segment]](repeating: [], count: sessions.count))
        let next = Mutex(0)
        let failure = Mutex<(any Error)?>(nil)
        DispatchQueue.concurrentPerform(iterations: min(ProcessInfo.processInfo.activeProcessorCount, sessions.count)) { _ in
            do {
                let tracker = try MediaPipeFaceTracker(options: trackerOptions)
                while failure.withLock({ $0 == nil }), let index = next.withLock({ n -> Int? in
                    defer { n += 1 }
                    return n < sessions.count ? n : nil
                }) {
                    let (person, experiment, session) = sessions[index]
                    let seed = 0x5EED_0000 &+ UInt64(experiment + seedOffset) &* 100_000 &+ UInt64(person) &* 1000 &+ UInt64(session)
                    let script = try performance(seed: seed, segments: segmentsPerSession)
                    let segments = try record(synths[person], script: script, tracker: tracker, topology: topology, person: person,
                                              session: experiment * sessionsPerPerson + session)
                    recorded.withLock { $0[index] = segments }
                }
            } catch {
                failure.withLock { $0 = $0 ?? error }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return recorded.withLock { $0.flatMap { $0 } }
    }

    /// The `width`×`height` part of `image` from (`x`, `y`), black where it falls outside.
    static func crop(_ image: RGBImage, x: Int, y: Int, width: Int, height: Int) -> RGBImage {
        var out = RGBImage(width: width, height: height)
        for row in 0..<height where (0..<image.height).contains(y + row) {
            for column in 0..<width where (0..<image.width).contains(x + column) {
                let from = ((y + row) * image.width + x + column) * 3, to = (row * width + column) * 3
                out.pixels[to] = image.pixels[from]; out.pixels[to + 1] = image.pixels[from + 1]; out.pixels[to + 2] = image.pixels[from + 2]
            }
        }
        return out
    }

    /// Runs one session: a fresh capture (and calibration) over the whole script, then features
    /// per segment.
    static func record(_ synth: TalkingFaceSynthesizer, script: ExpressionScript, tracker: MediaPipeFaceTracker,
                       topology: MeshTopology, person: Int, session: Int) throws -> [Segment] {
        tracker.reset()
        // The estimator's output, unfiltered; the default privacy level is applied below exactly
        // as ExpressionCapture applies it (estimator, privacy stage, frame; no voice here, so the
        // camera's jaw), so one tracking run gives both streams.
        let capture = ExpressionCapture(tracker: tracker, privacy: .off)
        // The strict level draws its own blinks; seeded per session, so that the guard's figure is
        // the same on every run (the seed is a hash, never the person: blinks name nobody).
        let privacySeed = 0xB11C_0000 &+ UInt64(person) &* 1000 &+ UInt64(session)
        var filter = ExpressionPrivacy(level: .default, seed: privacySeed)
        var exactFilter = ExpressionPrivacy(level: .default, seed: privacySeed)
        var exactEstimator = ExpressionEstimator()
        var image = RGBImage(width: 640, height: 480)
        var sent: [ExpressionFrame] = [], full: [ExpressionFrame] = [], meshes: [[Point3]?] = []
        var exact: [ExpressionFrame] = [], exactFiltered: [ExpressionFrame] = []
        /// What the receiver gets: the wire bytes, decoded.
        func received(_ frame: ExpressionFrame) throws -> ExpressionFrame { try ExpressionFrame(decoding: frame.encoded()) }
        /// The same from a sender whose expressions pass through `filter` before framing.
        func received(_ frame: ExpressionFrame, through filter: inout ExpressionPrivacy, at time: Double) throws -> ExpressionFrame {
            var frame = frame
            if frame.state == .tracked { frame.expression = filter.apply(frame.expression, at: time) }
            return try received(frame)
        }
        for (n, truth) in script.groundTruth.enumerated() {
            synth.frame(at: truth.state, into: &image)
            let micros = UInt64((truth.timeSeconds * 1e6).rounded())
            let out = try capture.process(image, captureTimeMicros: micros)
            sent.append(try received(out.frame, through: &filter, at: truth.timeSeconds))
            full.append(try received(out.frame))
            meshes.append(out.tracking.landmarks?.mesh)
            let exactLandmarks = topology.landmarks(mesh: synth.mesh(at: truth.state), leftPupil: nil, rightPupil: nil, confidence: 1)
            let expression = exactEstimator.update(exactLandmarks, at: truth.timeSeconds)
            let frame = ExpressionFrame(sequence: UInt32(n), captureTimeMicros: micros, state: expression == nil ? .lost : .tracked,
                                        expression: expression ?? .neutral)
            exact.append(try received(frame))
            exactFiltered.append(try received(frame, through: &exactFilter, at: truth.timeSeconds))
        }
        let truth = script.groundTruth
        if let dump = ProcessInfo.processInfo.environment["VEIL_REID_DUMP"] {
            try dumpFrames(to: dump, person: person, session: session, truth: truth, sent: sent, full: full, exact: exact,
                           meshes: ProcessInfo.processInfo.environment["VEIL_REID_DUMP_MESH"] == nil ? nil : meshes)
        }
        let perSegment = Int((segmentSeconds * framesPerSecond).rounded())
        let first = Int((warmUpSeconds * framesPerSecond).rounded())
        func tracked(_ frames: [ExpressionFrame], in window: Range<Int>) -> [ExpressionFrame] {
            window.compactMap { frames[$0].state == .tracked ? frames[$0] : nil }
        }
        var segments: [Segment] = []
        for index in 0..<segmentsPerSession {
            let window = (first + index * perSegment)..<(first + (index + 1) * perSegment)
            let frames = tracked(sent, in: window), fullFrames = tracked(full, in: window)
            let windowMeshes = window.compactMap { meshes[$0] }
            // A segment mostly without a face would be a tracking failure, not an identity test.
            guard frames.count * 2 >= perSegment, windowMeshes.count * 2 >= perSegment else {
                throw VeilError.invalidInput("\(photos[person]) session \(session) segment \(index): face tracked in only \(frames.count) of \(perSegment) frames")
            }
            var performedFrames: [ExpressionFrame] = [], performance: [ExpressionFrame] = []
            for n in window where sent[n].state == .tracked {
                var frame = sent[n]
                frame.expression = performing(truth[n], over: sent[n].expression)
                performedFrames.append(frame)
                frame.expression = performing(truth[n], over: .neutral)
                performance.append(frame)
            }
            segments.append(Segment(person: person, session: session, index: index,
                                    stream: streamFeatures(frames), fullExpressionStream: streamFeatures(fullFrames),
                                    landmarks: try landmarkFeatures(windowMeshes),
                                    exactMeshStream: streamFeatures(tracked(exact, in: window)),
                                    exactMeshFilteredStream: streamFeatures(tracked(exactFiltered, in: window)),
                                    performedChannelsStream: streamFeatures(performedFrames),
                                    performanceStream: streamFeatures(performance),
                                    scriptedJaw: mean(window.map { truth[$0].jawDrop }),
                                    streamJaw: mean(frames.map { Double($0.expression[.jawOpen]) }),
                                    scriptedYaw: mean(window.map { truth[$0].headYaw }),
                                    streamYaw: mean(frames.map { Double($0.expression.headPose.yaw) })))
        }
        return segments
    }

    /// `e` with the channels the script performs set to what it performed at `truth`: jawOpen from
    /// the jaw drop (5 per unit, as wide as the filter sends a syllable), each eye's blink, smile
    /// (with the dimples and cheeks the filter derives from it), brows raised, and yaw.
    static func performing(_ truth: GroundTruthFrame, over e: VeilCore.Expression) -> VeilCore.Expression {
        var e = e
        e[.jawOpen] = Float(truth.jawDrop * 5)
        e[.eyeBlinkLeft] = Float(truth.blinkLeft); e[.eyeBlinkRight] = Float(truth.blinkRight)
        ExpressionPrivacyFilter.setSmile(Float(truth.smile), in: &e)
        for shape in [BlendShape.browInnerUp, .browOuterUpLeft, .browOuterUpRight] { e[shape] = Float(truth.browRaise) }
        e.headPose.yaw = Float(truth.headYaw)
        return e
    }

    /// A random performance: `warmUpSeconds` then `segments` one-second segments, each with its
    /// own draws (all actions return to rest at every segment's end, so one segment's content
    /// does not spill into the next).
    static func performance(seed: UInt64, segments: Int) throws -> ExpressionScript {
        typealias K = ExpressionScript.Keyframe
        var rng = SplitMix64(seed: seed)
        func uniform(_ range: ClosedRange<Double>) -> Double { Double.random(in: range, using: &rng) }
        func chance(_ p: Double) -> Bool { uniform(0...1) < p }
        var jaw: [K] = [], blink: [K] = [], smile: [K] = [], brow: [K] = [], yaw: [K] = []
        // A rise, a hold and a fall back to rest, inside [start, end].
        func bump(_ track: inout [K], start: Double, end: Double, peak: Double) {
            let rise = uniform(0.12...0.25), fall = uniform(0.12...0.25)
            let begin = uniform(start...max(start, end - rise - fall - 0.05))
            let top = begin + rise, hold = uniform(top + 0.01...max(top + 0.01, end - fall))
            track += [K(time: begin, value: 0), K(time: top, value: peak), K(time: hold, value: peak),
                      K(time: hold + fall, value: 0)]
        }
        // The warm-up counts as a segment for what happens in it: people talk while calibrating.
        let starts = [0.0] + (0..<segments).map { warmUpSeconds + Double($0) * segmentSeconds }
        for (n, start) in starts.enumerated() {
            let end = n == 0 ? warmUpSeconds - 0.04 : start + segmentSeconds - 0.04
            let from = start + 0.02
            if chance(0.75) {
                // A phrase of syllables with varied jaw drop, some closing fully.
                var t = from + uniform(0...0.25)
                jaw.append(K(time: t, value: 0))
                while true {
                    let length = uniform(0.15...0.28)
                    guard t + length <= end - 0.03 else { break }
                    jaw.append(K(time: t + length / 2, value: uniform(0.02...0.12)))
                    t += length
                    jaw.append(K(time: t, value: chance(0.4) ? 0 : uniform(0...0.02)))
                }
                jaw.append(K(time: end - 0.01, value: 0))
            }
            if chance(0.35) {
                let length = uniform(0.15...0.25), at = uniform(from...(end - length - 0.01))
                blink += [K(time: at, value: 0), K(time: at + 0.4 * length, value: 1), K(time: at + length, value: 0)]
            }
            if chance(0.3) { bump(&smile, start: from, end: end, peak: uniform(0.3...1.0)) }
            if chance(0.25) { bump(&brow, start: from, end: end, peak: uniform(0.4...1.0)) }
            if chance(0.3) { bump(&yaw, start: from, end: end, peak: (chance(0.5) ? 1 : -1) * uniform(4...12)) }
        }
        let duration = warmUpSeconds + Double(segments) * segmentSeconds
        return try ExpressionScript(framesPerSecond: framesPerSecond, duration: duration,
                                    tracks: [.jawDrop: jaw, .blinkLeft: blink, .blinkRight: blink,
                                             .smile: smile, .browRaise: brow, .headYaw: yaw])
    }

    /// For offline analysis: one JSON line per frame appended to `path` when VEIL_REID_DUMP names
    /// it: the script (`truth`), the default stream as sent (`stream`, through the privacy filter),
    /// the estimator's output unfiltered (`full`, what `--full-expression` sends) and the exact-mesh
    /// stream (`exact`, unfiltered); with VEIL_REID_DUMP_MESH set, the tracker's mesh too.
    static func dumpFrames(to path: String, person: Int, session: Int, truth: [GroundTruthFrame],
                           sent: [ExpressionFrame], full: [ExpressionFrame], exact: [ExpressionFrame], meshes: [[Point3]?]? = nil) throws {
        func row(_ f: ExpressionFrame) -> [Float]? {
            guard f.state == .tracked else { return nil }
            let e = f.expression
            return e.coefficients + [e.headPose.yaw, e.headPose.pitch, e.headPose.roll, e.gaze?.x ?? .nan, e.gaze?.y ?? .nan]
        }
        var text = ""
        let encoder = JSONEncoder()
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "NaN")
        for (n, t) in truth.enumerated() {
            struct Line: Encodable { var person, session, frame: Int; var time: Double; var truth: [Double]; var stream, full, exact, mesh: [Float]? }
            let line = Line(person: person, session: session, frame: n, time: t.timeSeconds,
                            truth: [t.jawDrop, t.blinkLeft, t.blinkRight, t.smile, t.browRaise, t.headYaw],
                            stream: row(sent[n]), full: row(full[n]), exact: row(exact[n]),
                            mesh: meshes?[n].map { $0.flatMap { [$0.x, $0.y, $0.z] } })
            text += String(decoding: try encoder.encode(line), as: UTF8.self).replacingOccurrences(of: "\"NaN\"", with: "null") + "\n"
        }
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text.utf8))
    }

    // MARK: - Features

    /// Mean and standard deviation of each coefficient, of yaw, pitch and roll, and of gaze.
    static func streamFeatures(_ frames: [ExpressionFrame]) -> [Double] {
        var columns: [[Double]] = BlendShape.allCases.map { shape in frames.map { Double($0.expression[shape]) } }
        columns.append(frames.map { Double($0.expression.headPose.yaw) })
        columns.append(frames.map { Double($0.expression.headPose.pitch) })
        columns.append(frames.map { Double($0.expression.headPose.roll) })
        columns.append(frames.map { Double($0.expression.gaze?.x ?? 0) })
        columns.append(frames.map { Double($0.expression.gaze?.y ?? 0) })
        let c = BlendShape.allCases.count
        let means = columns.map(mean), deviations = columns.map(standardDeviation)
        // Laid out as `streamParts` says: coefficient means, coefficient deviations, pose, gaze.
        var features = Array(means[0..<c]) + Array(deviations[0..<c])
        for k in c..<columns.count { features += [means[k], deviations[k]] }
        return features
    }

    /// The 2-D mesh as the replaced approach sent it, normalised for position and scale (centroid
    /// at the origin, unit RMS radius), averaged over the segment.
    static func landmarkFeatures(_ meshes: [[Point3]]) throws -> [Double] {
        guard let count = meshes.first?.count, count > 0 else { throw VeilError.invalidInput("no landmarks") }
        var sum = [Double](repeating: 0, count: 2 * count)
        for mesh in meshes {
            guard mesh.count == count else { throw VeilError.invalidInput("meshes of different sizes") }
            let cx = mean(mesh.map { Double($0.x) }), cy = mean(mesh.map { Double($0.y) })
            let radius = mean(mesh.map { p in
                let dx = Double(p.x) - cx, dy = Double(p.y) - cy
                return dx * dx + dy * dy
            }).squareRoot()
            guard radius > 0 else { throw VeilError.invalidInput("degenerate mesh") }
            for (i, p) in mesh.enumerated() {
                sum[2 * i] += (Double(p.x) - cx) / radius
                sum[2 * i + 1] += (Double(p.y) - cy) / radius
            }
        }
        return sum.map { $0 / Double(meshes.count) }
    }

    // MARK: - Classifier and statistics

    /// Correct predictions out of a total.
    struct Score {
        var correct = 0, total = 0
        var accuracy: Double { total > 0 ? Double(correct) / Double(total) : 0 }

        init(correct: Int = 0, total: Int = 0) { self.correct = correct; self.total = total }

        /// The diagonal and the sum of confusion matrices (rows: true person, columns: predicted).
        init(_ confusions: [[[Int]]]) {
            for confusion in confusions {
                for row in confusion.indices { correct += confusion[row][row]; total += confusion[row].reduce(0, +) }
            }
        }
    }

    /// A 1-nearest-neighbour classifier: the person of the nearest training segment (Euclidean
    /// distance on features standardised with the training set's per-dimension deviation;
    /// dimensions constant over the training set are left out). Ties go to the earliest training
    /// segment.
    struct NearestNeighbour {
        let training: [(person: Int, features: [Double])]
        /// Per dimension, 1 / the training set's deviation (0 where it is constant). Standardising
        /// is a per-dimension scale; the centring would cancel in the difference.
        let scale: [Double]

        init(_ training: [(person: Int, features: [Double])]) {
            self.training = training
            scale = ReidentificationTests.inverseDeviations(training.map(\.features))
        }

        /// The person of `query`'s nearest training segment; nil without training data.
        func person(nearest query: [Double]) -> Int? {
            var best: (person: Int, distance: Double)?
            for item in training {
                var d = 0.0
                for k in scale.indices {
                    let diff = (item.features[k] - query[k]) * scale[k]
                    d += diff * diff
                }
                if best.map({ d < $0.distance }) ?? true { best = (item.person, d) }
            }
            return best?.person
        }
    }

    /// A stronger adversary than the nearest neighbour: multinomial logistic regression (softmax
    /// on features standardised with the training set's mean and deviation, an L2 penalty of
    /// `penalty` per training segment on the weights), fitted by accelerated gradient descent. It is
    /// trained on many recordings of every person at once and learns what they share, where the
    /// nearest neighbour matches single segments.
    struct LogisticRegressionAdversary {
        let mean: [Double], scale: [Double]
        /// Per person, a weight per feature and a bias (last).
        private(set) var weights: [[Double]]

        init(_ training: [(person: Int, features: [Double])], people: Int, penalty: Double = 10, iterations: Int = 600) {
            let width = training.first?.features.count ?? 0
            let mean = (0..<width).map { k in ReidentificationTests.mean(training.map { $0.features[k] }) }
            let scale = ReidentificationTests.inverseDeviations(training.map(\.features))
            self.mean = mean; self.scale = scale
            let rows = training.map { item in Self.standardised(item.features, mean, scale) + [1] }
            let n = Double(max(rows.count, 1)), lambda = penalty / n
            // The gradient of the mean loss is Lipschitz with at most half the mean squared norm of a row.
            let step = 1 / (0.5 * rows.reduce(0) { $0 + $1.reduce(0) { $0 + $1 * $1 } } / n + lambda)
            var w = [[Double]](repeating: [Double](repeating: 0, count: width + 1), count: people)
            var previous = w
            for iteration in 0..<iterations {
                // Nesterov's look-ahead point.
                let momentum = Double(iteration) / Double(iteration + 3)
                let ahead = w.indices.map { c in w[c].indices.map { k in w[c][k] + momentum * (w[c][k] - previous[c][k]) } }
                // The penalty's gradient; the bias (last) is not penalised.
                var gradient = ahead.map { w in w.indices.map { $0 < width ? lambda * w[$0] : 0 } }
                for (row, item) in zip(rows, training) {
                    let p = Self.probabilities(row, ahead)
                    for c in 0..<people {
                        let error = (p[c] - (c == item.person ? 1 : 0)) / n
                        for k in row.indices { gradient[c][k] += error * row[k] }
                    }
                }
                previous = w
                w = ahead.indices.map { c in ahead[c].indices.map { k in ahead[c][k] - step * gradient[c][k] } }
            }
            weights = w
        }

        /// The most probable person for `features`.
        func person(of features: [Double]) -> Int {
            let p = Self.probabilities(Self.standardised(features, mean, scale) + [1], weights)
            return p.indices.max { p[$0] < p[$1] } ?? 0
        }

        static func standardised(_ x: [Double], _ mean: [Double], _ scale: [Double]) -> [Double] {
            x.indices.map { (x[$0] - mean[$0]) * scale[$0] }
        }

        static func probabilities(_ row: [Double], _ weights: [[Double]]) -> [Double] {
            let logits = weights.map { w in zip(w, row).reduce(0) { $0 + $1.0 * $1.1 } }
            let top = logits.max() ?? 0
            let e = logits.map { exp($0 - top) }
            let sum = e.reduce(0, +)
            return e.map { $0 / sum }
        }
    }

    /// `LogisticRegressionAdversary` trained on the first session of every person in every run
    /// and tested on the second sessions, then the other way round. Returns, per test session,
    /// counts of (true person, predicted person).
    static func pooledSessionConfusions(_ segments: [Segment], _ features: (Segment) -> [Double]) -> [Int: [[Int]]] {
        let people = (segments.map(\.person).max() ?? -1) + 1
        var confusions: [Int: [[Int]]] = [:]
        for trainingHalf in 0..<sessionsPerPerson {
            let training = segments.filter { $0.session % sessionsPerPerson == trainingHalf }
            let adversary = LogisticRegressionAdversary(training.map { (person: $0.person, features: features($0)) }, people: people)
            for test in segments where test.session % sessionsPerPerson != trainingHalf {
                let predicted = adversary.person(of: features(test))
                confusions[test.session, default: [[Int]](repeating: [Int](repeating: 0, count: people), count: people)][test.person][predicted] += 1
            }
        }
        return confusions
    }

    /// The pooled adversary's score alone.
    static func pooledSessionScore(_ segments: [Segment], _ features: (Segment) -> [Double]) -> Score {
        Score(Array(pooledSessionConfusions(segments, features).values))
    }

    /// The pooled adversary's score, its 95 % bound under random matchings of each test session's
    /// people, and the probability of its score or more under them.
    static func pooledSessionChance(_ segments: [Segment], _ features: (Segment) -> [Double]) -> (score: Score, bound: Int, probability: Double) {
        let confusions = pooledSessionConfusions(segments, features).sorted { $0.key < $1.key }.map(\.value)
        let score = Score(confusions)
        let (bound, probability) = chance(of: score.correct, under: independentMatchingNullDistribution(confusions))
        return (score, bound, probability)
    }

    /// Per feature, 1 / its deviation over `rows` (0 where it is constant): the scale that
    /// standardises the features of a training set.
    static func inverseDeviations(_ rows: [[Double]]) -> [Double] {
        (0..<(rows.first?.count ?? 0)).map { k in
            let sd = standardDeviation(rows.map { $0[k] })
            return sd > 1e-12 ? 1 / sd : 0
        }
    }

    /// Train on each session in turn, test on the others.
    static func crossSessionAccuracy(_ segments: [Segment], _ features: (Segment) -> [Double]) -> Score {
        Score([crossSessionConfusion(segments, features)])
    }

    /// Counts of (true person, predicted person) over the cross-session predictions.
    static func crossSessionConfusion(_ segments: [Segment], _ features: (Segment) -> [Double]) -> [[Int]] {
        crossSessionConfusions(segments, features).values.reduce(into: [[Int]]()) { sum, confusion in
            if sum.isEmpty { sum = confusion; return }
            for row in confusion.indices { for column in confusion[row].indices { sum[row][column] += confusion[row][column] } }
        }
    }

    /// Per training session, counts of (the test segment's person, the training person predicted)
    /// over the predictions made from it.
    static func crossSessionConfusions(_ segments: [Segment], _ features: (Segment) -> [Double]) -> [Int: [[Int]]] {
        let people = (segments.map(\.person).max() ?? -1) + 1
        var confusions: [Int: [[Int]]] = [:]
        for session in Set(segments.map(\.session)).sorted() {
            var confusion = [[Int]](repeating: [Int](repeating: 0, count: people), count: people)
            let classifier = NearestNeighbour(segments.filter { $0.session == session }.map { (person: $0.person, features: features($0)) })
            let experiment = session / sessionsPerPerson
            for test in segments where test.session != session && test.experiment == experiment {
                guard let predicted = classifier.person(nearest: features(test)) else { continue }
                confusion[test.person][predicted] += 1
            }
            confusions[session] = confusion
        }
        return confusions
    }

    /// The distribution of the number of correct cross-session predictions if the stream said
    /// nothing about who is who. Within one experiment, which person of one session is which
    /// person of the other is then arbitrary: each of the people's n! matchings is equally likely,
    /// and the predictions (which depend on the features only) stay as they are. Unlike a
    /// binomial count, this keeps what the predictions of one session share: a session whose
    /// segments all resemble one person of the other session is right for all of them or for
    /// none. Needs two sessions per experiment (`confusions` keyed by session, 2e and 2e + 1).
    /// Returns P(correct = k) for k = 0, 1, ….
    static func permutationNullDistribution(_ confusions: [Int: [[Int]]]) -> [Double] {
        precondition(sessionsPerPerson == 2, "the matching is between two sessions")
        var distribution = [1.0]
        for experiment in Set(confusions.keys.map { $0 / 2 }).sorted() {
            // a → b: the matrix of training session a, tested on b (rows: b's people); and back.
            guard let a = confusions[2 * experiment], let b = confusions[2 * experiment + 1] else { continue }
            // Person p of session a is taken to be person match[p] of session b.
            distribution = addingMatchings(to: distribution, people: a.count) { match in
                a.indices.reduce(0) { $0 + a[match[$1]][$1] + b[$1][match[$1]] }
            }
        }
        return distribution
    }

    /// The distribution of the number of correct predictions of `LogisticRegressionAdversary` if
    /// the stream said nothing about who is who: each test session's people are then matched to
    /// the adversary's people at random, independently of the other sessions (each was recorded
    /// and tested on its own). `confusions`: per test session, counts of (true person, predicted).
    static func independentMatchingNullDistribution(_ confusions: [[[Int]]]) -> [Double] {
        var distribution = [1.0]
        for confusion in confusions {
            distribution = addingMatchings(to: distribution, people: confusion.count) { match in
                confusion.indices.reduce(0) { $0 + confusion[$1][match[$1]] }
            }
        }
        return distribution
    }

    /// Every ordering of 0..<n.
    static func permutations(_ n: Int) -> [[Int]] {
        guard n > 0 else { return [[]] }
        return permutations(n - 1).flatMap { p in (0...p.count).map { i in var q = p; q.insert(n - 1, at: i); return q } }
    }

    /// The distribution of X + Y, X ~ `distribution` and Y = `correct(match)` for a matching of
    /// `people` people drawn uniformly from all of them.
    static func addingMatchings(to distribution: [Double], people: Int, correct: ([Int]) -> Int) -> [Double] {
        let matchings = permutations(people)
        var counts: [Int] = []
        for match in matchings {
            let k = correct(match)
            if k >= counts.count { counts += [Int](repeating: 0, count: k - counts.count + 1) }
            counts[k] += 1
        }
        var next = [Double](repeating: 0, count: distribution.count + max(counts.count, 1) - 1)
        for (i, p) in distribution.enumerated() where p > 0 {
            for (j, c) in counts.enumerated() where c > 0 { next[i + j] += p * Double(c) / Double(matchings.count) }
        }
        return next
    }

    /// The cross-session nearest neighbour's score on a stream of `segments`, judged by random
    /// matchings: the 95 % bound of `permutationNullDistribution`, and the probability under it of
    /// as many correct predictions or more.
    static func matchingChance(_ segments: [Segment], _ features: (Segment) -> [Double]) -> (score: Score, bound: Int, probability: Double) {
        let confusions = crossSessionConfusions(segments, features)
        let score = Score(Array(confusions.values))
        let (bound, probability) = chance(of: score.correct, under: permutationNullDistribution(confusions))
        return (score, bound, probability)
    }

    /// The 95 % bound of a null distribution of correct predictions, and the probability under it
    /// of `correct` or more.
    static func chance(of correct: Int, under null: [Double]) -> (bound: Int, probability: Double) {
        (upperQuantile(null, level: 0.95), null.dropFirst(correct).reduce(0, +))
    }

    /// The smallest k with P(X ≤ k) ≥ `level` under `distribution`.
    static func upperQuantile(_ distribution: [Double], level: Double) -> Int {
        var cumulative = 0.0
        for (k, p) in distribution.enumerated() {
            cumulative += p
            if cumulative >= level - 1e-12 { return k }
        }
        return max(distribution.count - 1, 0)
    }

    /// Leave one segment out: every other segment of its experiment (of either session) is training data.
    static func leaveOneOutAccuracy(_ segments: [Segment], _ features: (Segment) -> [Double]) -> Score {
        let all = segments.map { (person: $0.person, features: features($0)) }
        var score = Score()
        for i in all.indices {
            let training = all.indices.filter { $0 != i && segments[$0].experiment == segments[i].experiment }.map { all[$0] }
            guard let predicted = NearestNeighbour(training).person(nearest: all[i].features) else { continue }
            score.total += 1
            if predicted == all[i].person { score.correct += 1 }
        }
        return score
    }

    /// The smallest k with P(X ≤ k) ≥ `level` for X ~ Binomial(`trials`, `probability`): more than
    /// k correct out of `trials` would be above chance at that one-sided confidence.
    static func binomialUpperQuantile(trials: Int, probability p: Double, level: Double) -> Int {
        guard trials > 0, p > 0, p < 1 else { return trials }
        // Log-space terms: (1 - p)^n underflows for large n.
        var logTerm = Double(trials) * log(1 - p)
        var distribution = [exp(logTerm)]
        for k in 0..<trials {
            logTerm += log(Double(trials - k)) - log(Double(k + 1)) + log(p) - log(1 - p)
            distribution.append(exp(logTerm))
        }
        return upperQuantile(distribution, level: level)
    }

    /// Least-squares slope of `y` on `x`; 0 when `x` is constant.
    static func slope(_ x: [Double], _ y: [Double]) -> Double {
        let mx = mean(x), my = mean(y)
        var xy = 0.0, xx = 0.0
        for (a, b) in zip(x, y) { xy += (a - mx) * (b - my); xx += (a - mx) * (a - mx) }
        return xx > 0 ? xy / xx : 0
    }

    static func mean(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count) }

    static func standardDeviation(_ values: [Double]) -> Double {
        let m = mean(values)
        return mean(values.map { ($0 - m) * ($0 - m) }).squareRoot()
    }

    static func percent(_ x: Double) -> String { String(format: "%.1f %%", x * 100) }
}
