import Darkroom
import DarkroomHTTPTestServer
import DarkroomVipsTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// `darkroom serve --shared-cache`: instances sharing one result cache on a real PostgreSQL server.
@Suite("darkroom serve --shared-cache")
struct ServeSharedCacheTests {
  /// The value of a counter in Prometheus text (`name` with its labels, as written).
  func counter(_ metrics: String, _ name: String) -> Double {
    metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
  }

  @Test("two instances sharing a cache: 100 concurrent requests for one image, spread over both, make one render")
  func oneRenderInTheCluster() async throws {
    let setup = try await QueueWorkerTests.Setup.start()
    let jpeg = try TestImages.encoded(.jpeg(), width: 800, height: 600).withUnsafeBytes { Array($0) }
    // The origin answers slowly, so that every request arrives while the one render runs.
    let origin = try await TestHTTPServer.start(routes: [
      "/a.jpg": .slowHeaders(delay: .milliseconds(400), then: .ok(body: jpeg, contentType: "image/jpeg"))
    ])
    var children: [StreamingChild] = []
    do {
      let config = setup.folder + "/serve.json"
      try #"{"privateHosts": ["127.0.0.1"], "origin": "\#(origin.baseURL)/", "allowUnsafe": true}"#.write(
        toFile: config, atomically: true, encoding: .utf8)
      var bases: [String] = []
      for _ in 0..<2 {
        let child = try StreamingChild.start([
          "serve", "--bind", "127.0.0.1:0", "--config", config, "--shared-cache", setup.url,
        ])
        children.append(child)
        let line = try #require(await child.line { $0.contains("listening on http://") })
        bases.append(try #require(line.split(separator: " ").last.map(String.init)))
      }
      let answers = try await withThrowingTaskGroup(of: (Int, Data).self) { group in
        for index in 0..<100 {
          let url = try #require(URL(string: bases[index % 2] + "/unsafe/fit-in/120x120/a.jpg"))
          group.addTask {
            let (body, response) = try await URLSession.shared.data(from: url)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, body)
          }
        }
        var answers: [(Int, Data)] = []
        for try await answer in group { answers.append(answer) }
        return answers
      }
      #expect(answers.count == 100 && answers.allSatisfy { $0.0 == 200 })
      #expect(Set(answers.map(\.1)).count == 1)  // the same bytes everywhere
      #expect(origin.requestCount("/a.jpg") == 1)
      var renders = 0.0
      var outcomes: [String: Double] = [:]
      for base in bases {
        let (data, _) = try await URLSession.shared.data(from: try #require(URL(string: base + "/metrics")))
        let metrics = String(decoding: data, as: UTF8.self)
        renders += counter(metrics, "darkroom_renders_total")
        for outcome in ["hit", "rendered", "waited", "unavailable"] {
          outcomes[outcome, default: 0] += counter(metrics, "darkroom_shared_cache_total{outcome=\"\(outcome)\"}")
        }
      }
      #expect(renders == 1 && outcomes["rendered"] == 1 && outcomes["unavailable"] == 0, "\(outcomes)")
      // The other instance waited for the render, or (had it asked later) found it stored.
      #expect((outcomes["waited"] ?? 0) + (outcomes["hit"] ?? 0) >= 1, "\(outcomes)")
      // A new instance answers from the shared cache without a render.
      let late = try StreamingChild.start(["serve", "--bind", "127.0.0.1:0", "--config", config, "--shared-cache", setup.url])
      children.append(late)
      let line = try #require(await late.line { $0.contains("listening on http://") })
      let base = try #require(line.split(separator: " ").last.map(String.init))
      let (body, _) = try await URLSession.shared.data(from: try #require(URL(string: base + "/unsafe/fit-in/120x120/a.jpg")))
      #expect(body == answers.first?.1)
      let (data, _) = try await URLSession.shared.data(from: try #require(URL(string: base + "/metrics")))
      let metrics = String(decoding: data, as: UTF8.self)
      #expect(
        counter(metrics, "darkroom_renders_total") == 0 && counter(metrics, "darkroom_shared_cache_total{outcome=\"hit\"}") == 1)
      #expect(origin.requestCount("/a.jpg") == 1)
    } catch {
      for child in children { kill(child.process.processIdentifier, SIGTERM) }
      for child in children { _ = await child.finish() }
      try? await origin.shutdown()
      await setup.stop()
      throw error
    }
    for child in children { kill(child.process.processIdentifier, SIGTERM) }
    for child in children {
      let ended = await child.finish()
      #expect(ended.status == 0, "\(ended.stderr)")
    }
    try await origin.shutdown()
    await setup.stop()
  }
}
