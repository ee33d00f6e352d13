import Foundation
import Testing

extension RunnerOutputTests {
  @Test(
    "inputs whose {name}-{variant} outputs would meet (a.jpg in variant b-c, a-b.png in variant c) get names of their own, the same in every run"
  )
  func variantNamesNeverMeet() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let pipeline = folder + "/meet.json"
    try Data(
      #"""
      {"version": 1, "name": "meet", "stages": [{"stage": "fetch"}, {"stage": "decode"}], "variants": [
        {"name": "b-c", "stages": [{"stage": "resize", "width": 40}, {"stage": "encode", "format": "png"}]},
        {"name": "c", "stages": [{"stage": "resize", "width": 30}, {"stage": "encode", "format": "png"}]}]}
      """#.utf8
    ).write(to: URL(fileURLWithPath: pipeline))
    let images = Runner.package.path + "/Examples/images/"
    try FileManager.default.createDirectory(atPath: folder + "/in", withIntermediateDirectories: true)
    try FileManager.default.copyItem(atPath: images + "dunes.jpg", toPath: folder + "/in/a.jpg")
    try FileManager.default.copyItem(atPath: images + "rings.png", toPath: folder + "/in/a-b.png")
    func outputs(_ inputs: [String], jobs: Int, into name: String) async throws -> [String: Data] {
      let output = folder + "/" + name
      let run = try await Runner.run(["run", pipeline] + inputs.map { folder + "/in/" + $0 } + ["-o", output, "-j", "\(jobs)"])
      #expect(run.status == 0, "\(run.stderr)")
      #expect(run.stderr.contains("done \(inputs.count), failed 0"), "\(run.stderr)")
      var files: [String: Data] = [:]
      for file in try FileManager.default.contentsOfDirectory(atPath: output) {
        files[file] = try Data(contentsOf: URL(fileURLWithPath: output + "/" + file))
      }
      return files
    }
    let together = try await outputs(["a.jpg", "a-b.png"], jobs: 2, into: "together")
    #expect(together.keys.sorted() == ["a-b-png-b-c.png", "a-b-png-c.png", "a-jpg-b-c.png", "a-jpg-c.png"])
    // Each file holds its own input's image: the one that input makes when it runs alone (where
    // both would be a-b-c.png, a different image each).
    let a = try await outputs(["a.jpg"], jobs: 1, into: "a")
    let ab = try await outputs(["a-b.png"], jobs: 1, into: "a-b")
    #expect(a["a-b-c.png"] != nil && ab["a-b-c.png"] != nil && a["a-b-c.png"] != ab["a-b-c.png"])
    #expect(together["a-jpg-b-c.png"] == a["a-b-c.png"] && together["a-jpg-c.png"] == a["a-c.png"])
    #expect(together["a-b-png-b-c.png"] == ab["a-b-b-c.png"] && together["a-b-png-c.png"] == ab["a-b-c.png"])
    // The names come from the set of inputs, not from which image finishes first.
    let again = try await outputs(["a-b.png", "a.jpg"], jobs: 1, into: "again")
    #expect(again == together)
  }
}
