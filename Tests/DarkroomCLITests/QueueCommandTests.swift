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
    #expect(first.status == 0 && first.stdout.contains("made the queue's tables (version 4)"), "\(first.stderr)")
    let second = try await Runner.run(["queue", "init", "--queue", url])
    #expect(second.status == 0 && second.stdout.contains("at version 4: nothing to do"), "\(second.stderr)")
    let wrong = try await Runner.run(["queue", "init", "--queue", "postgres://db:70000/x"])
    #expect(wrong.status == 64 && wrong.stderr.contains("port must be 1–65535"))
    let away = try await Runner.run(["queue", "init", "--queue", "postgres://darkroom@/x?host=\(server.folder)/gone"])
    #expect(away.status == 75 && away.stderr.contains("cannot reach the queue"), "\(away.stderr)")
    #expect(!away.stderr.contains("password"))
  }
}
