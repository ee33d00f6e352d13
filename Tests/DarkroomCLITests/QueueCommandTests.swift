import DarkroomCore
import DarkroomPostgresTestServer
import Foundation
import Testing

@Suite("darkroom queue, the command")
struct QueueCommandTests {
  @Test("queue init makes the tables, then has nothing to do; a wrong URL is 64, an unreachable queue 75")
  func initialize() async throws {
    let server = try await PostgresTestServer.shared()
    let location = try await server.newDatabase()
    let url = "postgres://darkroom@/\(location.database)?host=\(server.sockets)"
    let first = try await Runner.run(["queue", "init", "--queue", url])
    #expect(first.status == 0 && first.stdout.contains("made the queue's tables (version 5)"), "\(first.stderr)")
    let second = try await Runner.run(["queue", "init", "--queue", url])
    #expect(second.status == 0 && second.stdout.contains("at version 5: nothing to do"), "\(second.stderr)")
    let wrong = try await Runner.run(["queue", "init", "--queue", "postgres://db:70000/x"])
    #expect(wrong.status == 64 && wrong.stderr.contains("port must be 1–65535"))
    let away = try await Runner.run(["queue", "init", "--queue", "postgres://darkroom@/x?host=\(server.folder)/gone"])
    #expect(away.status == 75 && away.stderr.contains("cannot reach the database at postgres://"), "\(away.stderr)")
    #expect(!away.stderr.contains("password"))
    // No inputs is said as `darkroom run` says it (exit 1), before the queue is asked.
    let empty = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: empty) }
    let nothing = try await Runner.run([
      "run", "Examples/pipelines/thumbnail.json", empty, "--output", empty + "/out", "--queue",
      "postgres://darkroom@/x?host=\(server.folder)/gone",
    ])
    #expect(nothing.status == 1 && nothing.stderr.contains("no inputs"), "\(nothing.stderr)")
  }
}
