import Foundation
import Testing

/// Names are compared by their bytes: Swift compares strings by canonical equivalence, but on
/// Linux `café` composed and decomposed, or `K` and the Kelvin sign, are different files.
extension RunnerOutputTests {
  @Test("canonically equivalent file names are distinct inputs: each runs and gets its own output")
  func canonicallyEquivalentNames() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let images = Runner.package.path + "/Examples/images/"
    let inputs = folder + "/in"
    try FileManager.default.createDirectory(atPath: inputs, withIntermediateDirectories: true)
    // Swift keeps the scalars as written (no normalisation): four names, four byte sequences.
    let names = ["caf\u{E9}.jpg", "cafe\u{301}.jpg", "Kat.png", "\u{212A}at.png"]  // the last holds a WebP: the bytes decide
    let sources = ["dunes.jpg", "portrait-rotated.jpg", "rings.png", "checker.webp"]
    for (name, source) in zip(names, sources) {
      try FileManager.default.copyItem(atPath: images + source, toPath: inputs + "/" + name)
    }
    let listed = try FileManager.default.contentsOfDirectory(atPath: inputs)
    #expect(Set(listed.map { Array($0.utf8) }).count == 4, "the file system holds \(listed)")
    let run = try await Runner.run(["run", "Examples/pipelines/thumbnail.json", inputs, "--output", folder + "/out"])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(run.stderr.contains("done 4, failed 0"), "\(run.stderr)")
    #expect(!run.stderr.contains("more than once"), "\(run.stderr)")
    let outputs = try FileManager.default.contentsOfDirectory(atPath: folder + "/out")
    #expect(Set(outputs.map { Array($0.utf8) }).count == 4, "\(outputs)")
  }

  @Test("a placeholder inside a pipeline's name stays as it is: output names are the same in every run")
  func placeholderInPipelineName() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let pipeline = folder + "/p.json"
    try Data(
      """
      { "version": 1, "name": "p{width}", "stages": [
        { "stage": "fetch" }, { "stage": "decode" }, { "stage": "resize", "width": 32 },
        { "stage": "encode", "format": "png" }, { "stage": "write", "template": "{pipeline}-{name}.{ext}" } ] }
      """.utf8
    ).write(to: URL(fileURLWithPath: pipeline))
    for attempt in 0..<4 {
      let out = folder + "/out\(attempt)"
      let run = try await Runner.run(["run", pipeline, "Examples/images/dunes.jpg", "--output", out])
      #expect(run.status == 0, "\(run.stderr)")
      #expect(try FileManager.default.contentsOfDirectory(atPath: out) == ["p{width}-dunes.png"])
    }
  }

  @Test("two inputs of one 240-byte name in two folders: both written, their names kept within 255 bytes")
  func longNamesMadeUnique() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let name = String(repeating: "n", count: 240) + ".jpg"
    for sub in ["x", "y"] {
      try FileManager.default.createDirectory(atPath: folder + "/in/" + sub, withIntermediateDirectories: true)
      try FileManager.default.copyItem(
        atPath: Runner.package.path + "/Examples/images/dunes.jpg", toPath: folder + "/in/" + sub + "/" + name)
    }
    let run = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", folder + "/in", "--recursive", "--output", folder + "/out",
    ])
    #expect(run.status == 0 && run.stderr.contains("done 2, failed 0"), "\(run.stderr)")
    let outputs = try FileManager.default.contentsOfDirectory(atPath: folder + "/out")
    #expect(outputs.count == 2 && outputs.allSatisfy { $0.utf8.count <= 255 }, "\(outputs)")
  }
}
