import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

/// The pixel operations as JSON stages: validated before anything runs, then run end to end.
@Suite("Pixel operations in JSON")
struct OperationDefinitionTests {
  /// Runs `graph` on `bytes` written to a file of their own (read as a file is, sequentially),
  /// and decodes what it encoded.
  private func run(_ graph: StageGraph, on bytes: ImageBytes, named name: String) async throws -> VipsImage {
    let folder = NSTemporaryDirectory() + "darkroom-ops-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let path = folder + "/" + name
    try Data(bytes.data).write(to: URL(fileURLWithPath: path))
    let encoded = try await PipelineExecutor().start(graph, input: ImageSource(path), as: EncodedImage.self).value
    return try ImageDecoder(autoRotate: false).decode(FetchedData(source: encoded.source, bytes: encoded.bytes)).image
  }

  @Test("rotate, flip, grayscale, blur and sharpen load with their defaults and run on a real image")
  func loadAndRun() async throws {
    let json = """
      {"version": 1, "name": "ops", "stages": [{"stage": "fetch"}, {"stage": "decode"},
        {"stage": "rotate", "angle": 90}, {"stage": "flip"}, {"stage": "grayscale"}, {"stage": "blur", "sigma": 0.8},
        {"stage": "sharpen"}, {"stage": "encode", "format": "png"}]}
      """
    let graph = try PipelineDefinition.load(json: json, registry: Darkroom.standardRegistry)
    #expect(
      graph.runnableStages.map(\.identifier).dropFirst(2).prefix(5) == [
        "rotate(90)", "flip(horizontal)", "grayscale", "blur(0.8)", "sharpen(1.0,2.0)",
      ])
    let image = try await run(
      graph, on: try TestImages.encoded(.png(), width: 60, height: 40, quadrants: true), named: "quadrants.png")
    // A quarter turn, then a mirror: 40×60, and the top-left corner is red's grey again.
    #expect(image.width == 40 && image.height == 60 && image.bands == 1)
  }

  @Test(
    "turns and vertical flips work on a large JPEG read from a file, which its loader reads only in order",
    arguments: [
      #"{"stage": "rotate", "angle": 90}"#, #"{"stage": "flip", "direction": "vertical"}"#,
      #"{"stage": "flip", "direction": "both"}"#,
    ])
  func outOfOrder(_ stage: String) async throws {
    let json =
      #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, "# + stage
      + #", {"stage": "encode", "format": "jpeg"}]}"#
    let graph = try PipelineDefinition.load(json: json, registry: Darkroom.standardRegistry)
    let image = try await run(graph, on: try TestImages.encoded(.jpeg(), width: 2400, height: 1800), named: "large.jpg")
    #expect(image.width * image.height == 2400 * 1800)
  }

  @Test(
    "bad operation options are refused before anything runs, at their path, saying what is allowed",
    arguments: [
      (#"{"stage": "rotate", "angle": 45}"#, "90"),
      (#"{"stage": "rotate", "angle": 100}"#, "90, 180 or 270"),
      (#"{"stage": "rotate"}"#, "angle"),
      (#"{"stage": "flip", "direction": "diagonal"}"#, "horizontal"),
      (#"{"stage": "blur", "sigma": 0}"#, "sigma"),
      (#"{"stage": "blur", "sigma": 1000}"#, "100"),
      (#"{"stage": "blur"}"#, "sigma"),
      (#"{"stage": "sharpen", "amount": -1}"#, "amount"),
      (#"{"stage": "sharpen", "sigma": 50}"#, "10"),
      (#"{"stage": "grayscale", "strength": 1}"#, "strength"),
      (##"{"stage": "flatten", "background": "#12"}"##, "colour"),
      (#"{"stage": "extend", "top": -1}"#, "top"),
      (#"{"stage": "extend", "left": 70000}"#, "65535"),
      (#"{"stage": "extend", "background": "blue"}"#, "colour"),
      (#"{"stage": "trim", "threshold": 300}"#, "threshold"),
      (#"{"stage": "modulate", "hue": 720}"#, "hue"),
      (#"{"stage": "round"}"#, "radius"),
      (#"{"stage": "round", "radius": 5, "circle": true}"#, "not both"),
      (#"{"stage": "round", "radius": -5}"#, "radius"),
      (#"{"stage": "modulate", "brightness": -1}"#, "brightness"),
      (#"{"stage": "trim", "corner": "top-right"}"#, "bottom-right"),
      (#"{"stage": "trim", "background": "grey"}"#, "colour"),
      (#"{"stage": "resize", "width": 10, "dpr": 0.5}"#, "dpr"),
      (#"{"stage": "resize", "width": 10, "dpr": 9}"#, "dpr"),
      (#"{"stage": "resize", "width": 2000000000, "dpr": 2}"#, "dpr"),
      (#"{"stage": "metadata", "keep": ["gps"]}"#, "\"icc\", \"copyright\""),
      (#"{"stage": "metadata", "keep": "icc"}"#, "keep"),
      (#"{"stage": "overlay"}"#, "image"),
      (#"{"stage": "overlay", "image": "m.png", "opacity": 2}"#, "opacity"),
      (#"{"stage": "overlay", "image": "m.png", "scale": 0}"#, "scale"),
      (#"{"stage": "overlay", "image": "m.png", "gravity": "up"}"#, "gravity"),
    ])
  func refused(_ stage: String, _ expected: String) throws {
    let json = #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, "# + stage + "]}"
    let error = #expect(throws: PipelineError.self) {
      _ = try PipelineDefinition.load(json: json, registry: Darkroom.standardRegistry)
    }
    #expect(error?.code == .invalidDefinition, "\(String(describing: error))")
    let said = (error?.issues.map { "\($0.path) \($0.message)" } ?? []).joined(separator: "; ") + (error?.message ?? "")
    #expect(said.contains("stages[2]") && said.contains(expected), "\(said)")
  }

  @Test("a resize's dpr multiplies its box; flatten and extend load with their defaults")
  func dprAndPadding() throws {
    let json = """
      {"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "resize", "width": 100, "height": 50, "dpr": 2},
        {"stage": "flatten"}, {"stage": "extend", "top": 4}, {"stage": "encode", "format": "png"}]}
      """
    let identifiers = try PipelineDefinition.load(json: json, registry: Darkroom.standardRegistry).runnableStages.map(
      \.identifier)
    #expect(identifiers.contains { $0.contains("resize(200x100,") }, "\(identifiers)")
    #expect(identifiers.contains("flatten(255,255,255)") && identifiers.contains("extend(4,0,0,0,0,0,0,255)"), "\(identifiers)")
  }

  @Test("overlay reads its watermark when the pipeline loads, beneath the root; a missing, outside or non-image file is refused")
  func overlay() async throws {
    let folder = NSTemporaryDirectory() + "darkroom-overlay-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: folder + "/root", withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let mark = try TestImages.write(
      try TestImages.encoded(.png(), width: 20, height: 10, quadrants: true), named: "mark.png", in: folder + "/root")
    try Data("not an image".utf8).write(to: URL(fileURLWithPath: folder + "/root/notes.png"))
    try Data(try TestImages.encoded(.png(), width: 4, height: 4).data).write(to: URL(fileURLWithPath: folder + "/outside.png"))
    try Data(try TestImages.encoded(.png(), width: 4100, height: 2).data).write(
      to: URL(fileURLWithPath: folder + "/root/long.png"))
    func load(_ image: String, root: String? = nil) throws -> StageGraph {
      let json =
        #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, {"stage": "overlay", "image": "# + "\"\(image)\""
        + #", "gravity": "northwest", "x": 2, "y": 3, "opacity": 0.9}, {"stage": "encode", "format": "png"}]}"#
      return try PipelineDefinition.load(
        json: json, registry: Darkroom.standardRegistry, context: StageBuildContext(allowedRoot: root))
    }
    let graph = try load(mark)
    #expect(graph.runnableStages.map(\.identifier).contains { $0.hasPrefix("overlay(") && $0.contains("northwest,2,3") })
    let image = try await run(graph, on: try TestImages.encoded(.png(), width: 60, height: 40), named: "base.png")
    #expect(image.width == 60 && image.height == 40)
    #expect(colour(try image.pixel(x: 4, y: 5), isNear: TestImages.Quadrant.red, tolerance: 30))
    for (path, expected) in [
      (folder + "/root/missing.png", "missing.png"), (folder + "/outside.png", "outside"),
      (folder + "/root/notes.png", "not an image"), (folder + "/root/long.png", "2048 on each side"),
    ] {
      let error = #expect(throws: PipelineError.self) { _ = try load(path, root: folder + "/root") }
      let said = (error?.issues.map(\.message) ?? []).joined() + (error?.message ?? "")
      #expect(said.contains(expected) || said.contains("supported"), "\(said)")
    }
  }

  @Test("metadata strips everything by default and keeps what it names")
  func metadata() throws {
    func identifier(_ stage: String) throws -> String? {
      let json = #"{"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}, "# + stage + "]}"
      return try PipelineDefinition.load(json: json, registry: Darkroom.standardRegistry).runnableStages.last?.identifier
    }
    #expect(try identifier(#"{"stage": "metadata"}"#) == "metadata()")
    #expect(try identifier(#"{"stage": "metadata", "keep": ["copyright", "icc"]}"#) == "metadata(copyright,icc)")
  }
}
