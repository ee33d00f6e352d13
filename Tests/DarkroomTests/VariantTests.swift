import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

@Suite("Variants")
struct VariantTests {
  @Test("variants built in code share one decode and produce every size")
  func codeVariants() async throws {
    let directory = NSTemporaryDirectory() + "darkroom-variants-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = try TestImages.write(try TestImages.encoded(.jpeg(), width: 640, height: 480), named: "v.jpg", in: directory)
    let sizes = [64, 128, 256]
    let avatars = PipelineVariants(
      name: "avatar",
      prefix: Pipeline(name: "avatar") {
        Fetcher()
        ImageDecoder()
      },
      variants: sizes.map { size in
        (
          "\(size)",
          Pipeline<DecodedImage, EncodedImage> {
            Resizer(width: size, height: size, mode: .fill)
            ImageEncoder(.webp(quality: 80))
          }
        )
      })
    let loader = ImageLoader()
    let runs = avatars.load(ImageSource(path), with: loader)
    #expect(runs.map(\.variant) == ["64", "128", "256"])
    for (run, size) in zip(runs, sizes) {
      let image = try await run.operation.value
      #expect(image.width == size && image.height == size && image.format == .webp)
    }
    let decodes = runs.flatMap(\.operation.history).filter {
      guard case .stageStarted(let stage) = $0 else { return false }
      return stage.kind == "decode" && !stage.joined
    }
    #expect(decodes.count == 1)
  }

  @Test("variants from JSON: one graph each; problems are reported at the variant's path")
  func jsonVariants() throws {
    let json = """
      {"version": 1, "name": "family", "stages": [{"stage": "fetch"}, {"stage": "decode"}],
       "variants": [
         {"name": "small", "stages": [{"stage": "resize", "width": 32}, {"stage": "encode", "format": "png"}]},
         {"name": "large", "stages": [{"stage": "resize", "width": 512}, {"stage": "encode", "format": "jpeg"}]}]}
      """
    let set = try PipelineDefinition.loadSet(json: json, registry: Darkroom.standardRegistry)
    #expect(set.name == "family" && set.variants.map(\.name) == ["small", "large"])
    #expect(set.variants.allSatisfy { $0.graph.runnableStages.map(\.kind) == ["fetch", "decode", "resize", "encode"] })
    let single = #expect(throws: PipelineError.self) {
      _ = try PipelineDefinition.load(json: json, registry: Darkroom.standardRegistry)
    }
    #expect(single?.message.contains("declares variants") == true)

    let broken = """
      {"version": 1, "stages": [{"stage": "fetch"}, {"stage": "decode"}],
       "variants": [
         {"name": "a", "stages": [{"stage": "encode", "format": "png"}]},
         {"name": "a", "stages": [{"stage": "fetch"}]},
         {"name": "../x", "stages": [{"stage": "encode", "format": "png"}]}]}
      """
    let error = #expect(throws: PipelineError.self) {
      _ = try PipelineDefinition.loadSet(json: broken, registry: Darkroom.standardRegistry)
    }
    let paths = error?.issues.map(\.path) ?? []
    #expect(paths.contains("variants[1].name"))  // used twice
    #expect(paths.contains("variants[1].stages[0]"))  // fetch after decode
    #expect(paths.contains("variants[2].name"))  // not a file-name-safe name
  }
}
