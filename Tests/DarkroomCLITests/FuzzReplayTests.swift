import Foundation
import Testing

/// The fuzz harnesses, built normally, replay their seed corpora and every kept crash reproducer
/// (Tests/FuzzRegressions/<harness>): what the fuzzer once broke stays fixed.
@Suite("Fuzz harness replay")
struct FuzzReplayTests {
  static var binary: String {
    URL(fileURLWithPath: Runner.executable).deletingLastPathComponent().appendingPathComponent("darkroom-fuzz").path
  }

  static var corpus: String {
    if let configured = ProcessInfo.processInfo.environment["DARKROOM_CORPUS"], !configured.isEmpty { return configured }
    return Runner.package.deletingLastPathComponent().appendingPathComponent("shared/corpus").path
  }

  func replay(_ harness: String, _ paths: [String]) async throws -> Runner.Result {
    let binary = Self.binary
    return try await offPool { try Self.replayBlocking(binary, harness, paths) }
  }

  private static func replayBlocking(_ binary: String, _ harness: String, _ paths: [String]) throws -> Runner.Result {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = [harness] + paths
    process.currentDirectoryURL = Runner.package
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Runner.Result(status: process.terminationStatus, stdout: String(decoding: data, as: UTF8.self), stderr: "")
  }

  @Test(
    "each harness replays its seeds and the kept reproducers without a crash",
    arguments: ["json", "decode", "http", "cache", "imagetable", "disk"])
  func replaySeeds(harness: String) async throws {
    var seeds = ["Tests/FuzzRegressions/\(harness)"]
    switch harness {
    case "json": seeds += ["Examples/pipelines"]
    case "decode": seeds += [Self.corpus, "Examples/images"]
    default: seeds += ["Examples/images"]
    }
    let result = try await replay(harness, seeds)
    #expect(result.status == 0)
    let count = Int(result.stdout.split(separator: " ").dropFirst().first ?? "") ?? 0
    #expect(count > 0 && result.stdout.contains("no crash"), "\(result.stdout)")
  }

  @Test("the command-line fuzzer's kept reproducers (scripts/fuzz_cli.py) all end by themselves with a usage status")
  func replayCommandLines() async throws {
    let result = try await Runner.capture(
      executable: "/usr/bin/env",
      arguments: ["python3", "scripts/fuzz_cli.py", Runner.executable, "--replay", "Tests/FuzzRegressions/cli"])
    #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
    #expect(result.stdout.contains("replayed") && result.stdout.contains(", 0 failed"), "\(result.stdout)")
    #expect(!result.stdout.contains("replayed 0 "), "\(result.stdout)")
  }
}
