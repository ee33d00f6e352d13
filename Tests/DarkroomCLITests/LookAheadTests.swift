import Foundation
import Testing

/// How many operations `darkroom run` has in flight at once, read from its `--events jsonl`
/// stream: `started` opens one, a terminal event closes it.
@Suite("darkroom run's look-ahead image", .timeLimit(.minutes(4)))
struct LookAheadTests {
  func mostInFlight(_ arguments: [String]) async throws -> Int {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let run = try await Runner.run(
      ["run"] + arguments + ["Examples/images", "--output", folder, "--events", "jsonl", "--quiet"])
    #expect(run.status == 0, "\(run.stderr.suffix(300))")
    var open = 0
    var most = 0
    for line in run.stdout.split(separator: "\n") {
      let event = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
      switch event?["event"] as? String {
      case "started":
        open += 1
        most = max(most, open)
      case "finished", "failed", "cancelled": open -= 1
      default: break
      }
    }
    #expect(open == 0)
    return most
  }

  @Test(
    "one image more than --jobs is in flight for one fused variant with no time limit set; none with a limit, --jobs 1, variants or no fusion"
  )
  func lookAheadOnlyWhereItCostsNothing() async throws {
    let thumbnail = "Examples/pipelines/thumbnail.json"
    #expect(try await mostInFlight([thumbnail, "--jobs", "2"]) == 3)
    #expect(try await mostInFlight([thumbnail, "--jobs", "3"]) == 4)
    // A time limit covers the wait for a slot: the waiting image would spend its own.
    #expect(try await mostInFlight([thumbnail, "--jobs", "2", "--timeout", "60"]) == 2)
    #expect(try await mostInFlight([thumbnail, "--jobs", "2", "--stage-timeout", "encode=60"]) == 2)
    // One at a time, in the order given.
    #expect(try await mostInFlight([thumbnail, "--jobs", "1"]) == 1)
    // Unfused, the decode holds the whole image.
    #expect(try await mostInFlight([thumbnail, "--jobs", "2", "--no-fusion"]) == 2)
    // Variants share a full decode: three operations an image, two images.
    #expect(try await mostInFlight(["Examples/pipelines/avatar-sizes.json", "--jobs", "2"]) == 6)
  }
}
