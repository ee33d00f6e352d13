import Foundation
import Testing

@testable import DarkroomCLI

/// `--input-list`: read as it streams in, one line at a time.
@Suite("Input lists", .serialized, .timeLimit(.minutes(3)))
struct InputListTests {
  static let pipeline = "Examples/pipelines/thumbnail.json"

  @Test("a line of up to 64 KiB is an input; a longer one is refused (exit 64) naming its line number")
  func lineLimit() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let list = folder + "/list.txt"
    func listed(_ lines: [Data]) async throws -> Runner.Result {
      // Appended, not `Data(lines.joined())`: that copies byte by byte, seconds for 60 MB in a debug build.
      var contents = Data()
      for line in lines { contents.append(line) }
      try contents.write(to: URL(fileURLWithPath: list))
      return try await Runner.run(["run", Self.pipeline, "--input-list", list, "--output", folder + "/out"])
    }
    let image = Data("Examples/images/rings.png\n".utf8)
    // 65,536 bytes and a CRLF: taken as a name (too long for a file, so that input fails).
    let longest = Data(repeating: UInt8(ascii: "x"), count: 65_536) + Data("\r\n".utf8)
    let taken = try await listed([image, longest])
    #expect(taken.status == 1, "\(taken.stderr)")
    #expect(taken.stderr.contains("done 1, failed 1"), "\(taken.stderr)")
    let over = Data(repeating: UInt8(ascii: "x"), count: 65_537) + Data("\n".utf8)
    let refused = try await listed([image, image, over])
    #expect(refused.status == 64, "\(refused.stderr)")
    #expect(refused.stderr.contains("line 3 is longer than 65536 bytes"), "\(refused.stderr)")
    // One 60 MB line, without a line feed at its end.
    let huge = try await listed([image, Data(repeating: UInt8(ascii: "x"), count: 60_000_000)])
    #expect(huge.status == 64 && huge.stderr.contains("line 2 is longer than 65536 bytes"), "\(huge.stderr)")
  }

  @Test("a byte-order mark opening a list is not part of the first name")
  func byteOrderMark() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let list = folder + "/list.txt"
    try (Data([0xEF, 0xBB, 0xBF]) + Data("Examples/images/rings.png\nExamples/images/dunes.jpg\n".utf8))
      .write(to: URL(fileURLWithPath: list))
    let run = try await Runner.run(["run", Self.pipeline, "--input-list", list, "--output", folder + "/out"])
    #expect(run.status == 0 && run.stderr.contains("done 2, failed 0"), "\(run.stderr)")
  }

  @Test("a 60 MB line on standard input is refused as it streams in: the runner ends before the line has arrived")
  func longLineStreamed() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let child = try StreamingChild.start(
      ["run", Self.pipeline, "--input-list", "-", "--output", folder + "/out"], feedingInput: true)
    let line = Data("Examples/images/rings.png\n".utf8) + Data(repeating: UInt8(ascii: "x"), count: 60_000_000)
    let (sent, error) = await child.send(line)
    let result = await child.finish()
    #expect(result.status == 64, "\(result.stderr)")
    #expect(result.stderr.contains("line 2 is longer than 65536 bytes"), "\(result.stderr)")
    // The runner stopped reading after 64 KiB of the line and went away: the rest could not be
    // sent (what was sent is that, plus what the socket buffers held).
    #expect(error != nil, "all \(sent) bytes were read")
    #expect(sent < line.count / 4, "\(sent) bytes sent")
  }
}

extension InputListTests {
  @Test("names that are not UTF-8 are refused, never repaired into another file's name: arguments and list lines")
  func notUTF8() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    // `a\u{FFFD}.png` exists: the repaired spelling of `a\xFF.png` must not reach it.
    try FileManager.default.copyItem(
      atPath: Runner.package.path + "/Examples/images/rings.png", toPath: folder + "/a\u{FFFD}.png")
    let argument = try await Shell.run(
      "\"$DARKROOM\" run Examples/pipelines/thumbnail.json \"$WORK/$(printf 'a\\377.png')\" --output \"$WORK/out\"", work: folder)
    #expect(argument.status == 64, "\(argument.stderr)")
    #expect(argument.stderr.contains("argument 3 is not valid UTF-8"), "\(argument.stderr)")
    let list = folder + "/list.txt"
    try (Data((folder + "/a").utf8) + Data([0xFF]) + Data(".png\n".utf8)).write(to: URL(fileURLWithPath: list))
    let listed = try await Runner.run(["run", Self.pipeline, "--input-list", list, "--output", folder + "/out"])
    #expect(listed.status == 64, "\(listed.stderr)")
    #expect(listed.stderr.contains("line 1 is not valid UTF-8"), "\(listed.stderr)")
    #expect(!FileManager.default.fileExists(atPath: folder + "/out"))
  }

  @Test("an input list on a closed standard input ends at once as an empty list, with no hang")
  func closedStandardInput() async throws {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let run = try await Shell.run(
      "exec \"$DARKROOM\" run Examples/pipelines/thumbnail.json --input-list - --output \"$WORK/out\" <&-", work: folder)
    #expect(run.status == 1, "\(run.stderr)")
    #expect(run.stderr.contains("the input list is empty"), "\(run.stderr)")
  }
}

/// Each line of a list loses the spaces and tabs at its ends, as Foundation's trimming took them.
@Suite("Input list lines")
struct InputListLineTests {
  @Test("entries are the lines without their spaces and tabs at either end; other spaces, blank and # lines as before")
  func trimmedAsBefore() throws {
    let pieces = [" ", "\t", "a", "é", "\u{301}", "\u{A0}", "\u{3000}", "#", "x/y.jpg", "\u{200B}", "\r", "\u{FEFF}"]
    var generator = SystemRandomNumberGenerator()
    var lines: [String] = []
    for _ in 0..<3_000 {
      lines.append(
        (0..<Int.random(in: 0...6, using: &generator)).map { _ in pieces.randomElement(using: &generator) ?? "" }.joined())
    }
    var splitter = InputList.LineSplitter(maxLineBytes: 1 << 16)
    let text = lines.map { $0.replacingOccurrences(of: "\r", with: "") }
    let bytes = Array(text.joined(separator: "\n").utf8) + [UInt8(ascii: "\n")]
    _ = bytes.withUnsafeBytes { splitter.take($0) }
    let expected = text.enumerated().compactMap { index, line -> String? in
      var line = line
      if index == 0, line.utf8.starts(with: [0xEF, 0xBB, 0xBF]) {
        line = String(decoding: line.utf8.dropFirst(3), as: UTF8.self)
      }
      let entry = line.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
      return entry.isEmpty || entry.hasPrefix("#") ? nil : entry
    }
    #expect(try splitter.finish() == expected)
  }
}
