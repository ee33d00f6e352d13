import ArgumentParser
import Testing

@testable import DarkroomCLI

/// `darkroom run` parsed with `run` as the root command (the quick path every run takes) gives
/// the command the whole command tree gives, and leaves everything else to the whole tree.
@Suite("run command lines parsed quickly")
struct RunParseTests {
  @Test("a run parses to the same command either way")
  func sameCommand() throws {
    let lines: [[String]] = [
      ["run", "p.json", "a.jpg"],
      ["run", "p.json", "photos", "-o", "thumbs", "--jobs", "3", "--quiet", "--timeout", "2.5"],
      ["run", "--output=out2", "p.json", "--input-list", "urls.txt", "--fetch-concurrency", "32", "--stage-timeout", "decode=1"],
      ["run", "p.json", "--", "--help", "-x.jpg"],
      ["run", "p.json", "a.jpg", "--queue", "postgres://db/q", "--batch", "b1"],
      ["run", "p.json", "a.jpg", "--dry-run", "--events", "jsonl", "--skip-existing", "--no-fusion"],
    ]
    for line in lines {
      let quick = try #require(DarkroomCommand.parsedQuickly(line), "\(line)")
      let whole = try #require(try DarkroomCommand.parseAsRoot(line) as? RunCommand, "\(line)")
      #expect(String(reflecting: quick) == String(reflecting: whole), "\(line)")
      #expect(quick.output == whole.output && quick.input.inputs == whole.input.inputs, "\(line)")
    }
  }

  @Test("help, completion requests, other commands and mistakes are left to the whole tree")
  func leftToTheTree() {
    let lines: [[String]] = [
      ["run", "--help"], ["run", "-h"], ["run", "p.json", "--help"], ["run"], ["run", "p.json", "--bogus"],
      ["run", "--generate-completion-script", "bash"], ["run", "--generate-completion-script"],
      ["run", "p.json", "a.jpg", "--jobs", "x"], ["run", "p.json", "a.jpg", "--queue", "postgres://db/q", "--dry-run"],
      ["run", "--experimental-dump-help"], ["validate", "p.json"], ["help", "run"], [],
    ]
    for line in lines { #expect(DarkroomCommand.parsedQuickly(line) == nil, "\(line)") }
  }
}
