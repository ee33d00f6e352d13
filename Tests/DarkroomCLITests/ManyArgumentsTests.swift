import Foundation
import Testing

/// Command lines of tens of thousands of positional values: every one is taken, in order, with the
/// options between them applied (swift-argument-parser alone took 45 s for 16,000; the runner
/// folds long runs before parsing, `FoldedArguments`).
@Suite("Many positional arguments", .serialized, .timeLimit(.minutes(5)))
struct ManyArgumentsTests {
  @Test("validate takes 16,000 pipeline files, each checked once and in order")
  func validateMany() async throws {
    let paths = (0..<16_000).map { $0 % 1_000 == 7 ? "missing-\($0).json" : "Examples/pipelines/thumbnail.json" }
    let run = try await Runner.run(["validate"] + paths)
    #expect(run.status == 2, "\(run.stderr.suffix(500))")
    let valid = run.stdout.split(separator: "\n").filter { $0.hasPrefix("ok: Examples/pipelines/thumbnail.json") }
    let invalid = run.stderr.split(separator: "\n").filter { $0.hasPrefix("invalid: ") }
    #expect(valid.count == 16_000 - 16, "\(run.stdout.suffix(300))")
    #expect(invalid.count == 16, "\(run.stderr.suffix(500))")
    let expected = paths.filter { $0.hasPrefix("missing-") }
    #expect(zip(invalid, expected).allSatisfy { $0.contains($1) }, "\(invalid.prefix(3))")
  }

  @Test("run takes 16,000 inputs with options between them and after --, and runs every one")
  func runMany() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let missing = (0..<16_000).map { "\(folder)/missing-\($0).jpg" }
    // Options among the inputs, with values (which must not be taken for inputs), flags, the
    // pipeline after an option, a real image in the middle, and a name starting with "-" after "--".
    let dash = folder + "/-dash.png"
    try FileManager.default.copyItem(atPath: Runner.package.path + "/Examples/images/rings.png", toPath: dash)
    let arguments =
      ["run", "--output", folder + "/out", "--quiet", "Examples/pipelines/thumbnail.json"] + missing[0..<8_000]
      + ["--jobs", "1", "Examples/images/dunes.jpg"] + missing[8_000...] + ["--", "-dash.png"]
    let run = try await Runner.capture(
      executable: "/usr/bin/env", arguments: ["-C", folder, Runner.executable] + arguments.map(absolute))
    #expect(run.status == 1)
    // One at a time (--jobs 1), so the failures come in the order the inputs were given.
    let failed = run.stderr.split(separator: "\n").compactMap { line -> String? in
      guard line.hasPrefix("failed: "), let end = line.range(of: ": notFound") else { return nil }
      return String(line[line.index(line.startIndex, offsetBy: 8)..<end.lowerBound])
    }
    #expect(failed == missing, "\(failed.count) failures: \(run.stderr.suffix(500))")
    let written = try FileManager.default.contentsOfDirectory(atPath: folder + "/out").sorted()
    #expect(written == ["-dash-thumb.jpg", "dunes-thumb.jpg"])
  }

  @Test("grouped short options taking values (-oj OUT 1) and a flag between every two inputs: the parser's reading is kept")
  func groupedAndInterleaved() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let missing = (0..<4_000).map { "\(folder)/missing-\($0).jpg" }
    var arguments = ["run", "-oj", folder + "/out", "1", Runner.package.path + "/Examples/pipelines/thumbnail.json"]
    for (index, path) in missing.enumerated() {
      arguments.append(path)
      if index % 2 == 1 { arguments.append("--recursive") }
    }
    arguments.append(Runner.package.path + "/Examples/images/dunes.jpg")
    let run = try await Runner.run(arguments)
    #expect(run.status == 1, "\(run.stderr.suffix(300))")
    let failed = run.stderr.split(separator: "\n").compactMap { line -> String? in
      guard line.hasPrefix("failed: "), let end = line.range(of: ": notFound") else { return nil }
      return String(line[line.index(line.startIndex, offsetBy: 8)..<end.lowerBound])
    }
    #expect(failed == missing, "\(failed.count) failures: \(run.stderr.suffix(300))")
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder + "/out") == ["dunes-thumb.jpg"])
    #expect(!run.stderr.contains("\u{0}"))
  }

  /// Package-relative paths made absolute (the run above works in its own folder).
  private func absolute(_ argument: String) -> String {
    argument.hasPrefix("Examples/") ? Runner.package.path + "/" + argument : argument
  }
}
