import Darkroom
import DarkroomHTTPTestServer
import Foundation
import Synchronization
import Testing

@testable import DarkroomHTTP

/// Hits answered on the connection's event loop, before Hummingbird's router.
@Suite("darkroom serve answers hits from memory on the connection")
struct MemoryHitHandlerTests {
  @Test("a hit answered on the connection is the router's answer: headers, body, 304, HEAD, request id")
  func sameAnswer() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 1, delay: .zero)
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let path = "/unsafe/fit-in/40x40/0.jpg"
    let rendered = try await running.get(path, headers: ["Accept": "image/webp"])
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 0)
    let hit = try await running.get(path, headers: ["Accept": "image/webp", "X-Request-Id": "client-7"])
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 1)
    #expect(hit.status == 200 && hit.body == rendered.body && !hit.body.isEmpty)
    for name in ["content-type", "etag", "vary", "content-length"] {
      #expect(hit.headers[name] == rendered.headers[name], "\(name)")
    }
    #expect(hit.headers["content-type"] == "image/webp")
    #expect(hit.headers["cache-control"]?.hasPrefix("public, max-age=") == true)
    #expect(hit.headers["x-request-id"] == "client-7")
    #expect(hit.headers["date"]?.hasSuffix(" GMT") == true)
    // The client asked to close: the answer says so, and the connection ends (get reads to the end).
    #expect(hit.headers["connection"] == "close")

    let etag = try #require(rendered.headers["etag"])
    let notModified = try await running.get(path, headers: ["Accept": "image/webp", "If-None-Match": etag])
    #expect(notModified.status == 304 && notModified.body.isEmpty && notModified.headers["etag"] == etag)
    let head = try await running.get(path, method: "HEAD", headers: ["Accept": "image/webp"])
    #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"] == rendered.headers["content-length"])
    // JPEG is another entry: the first asks the router, the second is answered here.
    let jpeg = try await running.get(path)
    #expect(jpeg.headers["content-type"] == "image/jpeg" && jpeg.body != rendered.body)
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 3)
    #expect(try await running.get(path).body == jpeg.body)
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 4)
    #expect(try await running.metric("darkroom_renders_total") == 2)
    #expect(try await running.metric("darkroom_result_cache_hits_total") == 4)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("what needs the router goes there: a query, another method, /healthz, a URL not answered before")
  func routerKeepsTheRest() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 1, delay: .zero)
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let path = "/unsafe/20x20/0.jpg"
    #expect(try await running.get(path).status == 200)
    #expect(try await running.get(path + "?v=2").status == 200)
    #expect(try await running.get(path, method: "POST").status != 200)
    #expect(try await running.get("/healthz").status == 200)
    #expect(try await running.get("/unsafe/21x21/0.jpg").status == 200)
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 0)
    #expect(try await running.get(path).status == 200)
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == 1)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("kept-alive and pipelined connections get their answers in order when hits and renders mix")
  func order() async throws {
    let origin = try await ServedFixtures.slowOrigin(images: 3, delay: .milliseconds(300))
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.baseURL))
    let hit = "/unsafe/33x33/0.jpg"
    #expect(try await running.get(hit).status == 200)
    // A slow render first: the hits pipelined behind it must wait for its answer.
    let pipelined = [
      "/unsafe/44x44/1.jpg", hit, "/unsafe/filters:nope()/0.jpg", hit, "/unsafe/55x55/2.jpg", hit, "/healthz", hit,
    ]
    let (replies, stayedOpen) = try await RawSocket.keepAlive(port: running.port, paths: pipelined, pipelined: true)
    #expect(stayedOpen)
    #expect(replies.map(\.status) == [200, 200, 400, 200, 200, 200, 200, 200])
    let widths = try replies.filter { $0.headers["content-type"] == "image/jpeg" }.map { try size(of: $0.body).0 }
    #expect(widths == [44, 33, 33, 55, 33, 33])
    // One after another on one connection: every hit answered here, the connection kept.
    let before = running.server.eventLoopAnswers.load(ordering: .relaxed)
    let (again, open) = try await RawSocket.keepAlive(port: running.port, paths: Array(repeating: hit, count: 20))
    #expect(open && again.count == 20 && again.allSatisfy { $0.status == 200 && $0.body == replies[1].body })
    #expect(running.server.eventLoopAnswers.load(ordering: .relaxed) == before + 20)
    try await running.stop()
    try await origin.shutdown()
  }
}
