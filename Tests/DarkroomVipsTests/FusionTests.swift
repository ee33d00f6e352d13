import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Testing

@Suite("Shrink-on-load fusion")
struct FusionTests {
  struct Case: Sendable, CustomTestStringConvertible {
    var name: String
    var format: EncodeFormat
    var orientation: Int?
    var crop: CropRegion?
    var resizer: Resizer
    var testDescription: String { name }
  }

  static let cases: [Case] = [
    Case(name: "jpeg fit", format: .jpeg(quality: 92), resizer: Resizer(width: 300, height: 300, mode: .fit)),
    Case(name: "jpeg fill", format: .jpeg(quality: 92), resizer: Resizer(width: 200, height: 150, mode: .fill)),
    Case(name: "jpeg stretch", format: .jpeg(quality: 92), resizer: Resizer(width: 100, height: 333, mode: .stretch)),
    Case(
      name: "jpeg orientation 6 + relative crop + fill", format: .jpeg(quality: 92), orientation: 6,
      crop: .relative(x: 0.1, y: 0.2, width: 0.6, height: 0.7), resizer: Resizer(width: 160, height: 160, mode: .fill)),
    Case(
      name: "jpeg orientation 5 + crop + fit", format: .jpeg(quality: 92), orientation: 5,
      crop: .relative(x: 0.3, y: 0, width: 0.7, height: 0.5),
      resizer: Resizer(width: 120, height: 120, mode: .fit)),
    Case(
      name: "jpeg orientation 7 + crop + fit", format: .jpeg(quality: 92), orientation: 7,
      crop: .relative(x: 0.05, y: 0.1, width: 0.5, height: 0.8),
      resizer: Resizer(width: 120, height: 120, mode: .fit)),
    Case(
      name: "jpeg orientation 8 + crop + fit", format: .jpeg(quality: 92), orientation: 8,
      crop: .relative(x: 0.2, y: 0.3, width: 0.8, height: 0.6),
      resizer: Resizer(width: 120, height: 120, mode: .fit)),
    Case(name: "webp fit", format: .webp(quality: 95), resizer: Resizer(width: 250, mode: .fit)),
    Case(name: "png fill", format: .png(), resizer: Resizer(width: 100, height: 100, mode: .fill)),
  ]

  @Test("the fused path gives the same size and nearly the same pixels", arguments: cases)
  func fusedMatchesUnfused(_ testCase: Case) async throws {
    let input = try TestImages.fetched(testCase.format, width: 2000, height: 1400, orientation: testCase.orientation)
    var stages: [AnyStage] = [AnyStage(ImageDecoder())]
    if let crop = testCase.crop { stages.append(AnyStage(Cropper(crop))) }
    stages.append(AnyStage(testCase.resizer))
    stages.append(AnyStage(ImageEncoder(.png())))
    let fused = try Pipeline<FetchedData, EncodedImage>(StageGraph(name: "fused", stages: stages, fusion: true))
    let plain = try Pipeline<FetchedData, EncodedImage>(StageGraph(name: "plain", stages: stages, fusion: false))
    #expect(fused.graph.runnableStages.count == 2)
    #expect(
      fused.graph.runnableStages[0].fusedKinds == (testCase.crop == nil ? ["decode", "resize"] : ["decode", "crop", "resize"]))
    #expect(plain.graph.runnableStages.count == stages.count)
    let a = try decodeBack(try await fused.process(input))
    let b = try decodeBack(try await plain.process(input))
    #expect([a.width, a.height] == [b.width, b.height])
    #expect(try meanDifference(a.image, b.image) < 3.0)
  }

  @Test("the fusion shows in events")
  func fusionInEvents() async throws {
    let observer = RecordingObserver()
    let pipeline = Pipeline(name: "thumb") {
      ImageDecoder()
      Resizer(width: 64, height: 64)
      ImageEncoder(.jpeg())
    }
    _ = try await pipeline.run(
      try TestImages.fetched(.jpeg(), width: 800, height: 600), options: RunOptions(observers: [observer])
    ).value
    let kinds = observer.events.compactMap { event -> String? in
      if case .stageStarted(let stage) = event { return stage.kind }
      return nil
    }
    #expect(kinds == ["decode+resize", "encode"])
  }

  @Test("JPEG load shrink follows sharp's rule")
  func shrinkRule() {
    #expect(ShrinkOnLoadDecoder.loadShrink(for: 1.5) == 1)
    #expect(ShrinkOnLoadDecoder.loadShrink(for: 2.0) == 1)
    #expect(ShrinkOnLoadDecoder.loadShrink(for: 2.5) == 1)  // (int)2.5 == 2: halved, as sharp does
    #expect(ShrinkOnLoadDecoder.loadShrink(for: 3.78) == 2)
    #expect(ShrinkOnLoadDecoder.loadShrink(for: 4.0) == 2)
    #expect(ShrinkOnLoadDecoder.loadShrink(for: 6.0) == 4)
    #expect(ShrinkOnLoadDecoder.loadShrink(for: 8.5) == 4)
    #expect(ShrinkOnLoadDecoder.loadShrink(for: 9.0) == 8)
    #expect(ShrinkOnLoadDecoder.loadShrink(for: 12.8) == 8)
  }

  @Test("a pixel crop or a non-image stage between decode and resize is not fused")
  func onlyRelativeCropsFuse() throws {
    let graph = try StageGraph(
      name: "p",
      stages: [
        AnyStage(ImageDecoder()), AnyStage(Cropper(.pixels(x: 0, y: 0, width: 10, height: 10))), AnyStage(Resizer(width: 5)),
      ])
    #expect(graph.runnableStages.map(\.kind) == ["decode", "crop", "resize"])
  }
}
