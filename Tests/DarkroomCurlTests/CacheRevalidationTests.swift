import Darkroom
import DarkroomHTTPTestServer
import DarkroomTesting
import Foundation
import Testing

/// Cache freshness and revalidation over HTTP. Part of the serialized "HTTP fetching" suite: its
/// leak checks read a process-wide count of live transfers.
extension HTTPTransportTests {
  var otherImage: [UInt8] {
    get throws { Array(try TestImages.encoded(.jpeg(), width: 320, height: 240, quadrants: true).data) }
  }

  func revalidatingFetcher() -> Fetcher {
    var http = HTTPOptions()
    http.allowHosts = ["127.0.0.1"]
    return Fetcher(transports: [HTTPTransport(options: http)])
  }

  func thumbnail(store: any CacheStore, maxAge: Duration? = nil) -> Pipeline<ImageSource, EncodedImage> {
    let fetch = revalidatingFetcher()
    return Pipeline(name: "revalidate") {
      fetch
      Decoder()
      Resizer(width: 60)
      Encoder(.png())
      Cache<EncodedImage>(store: store, maxAge: maxAge)
    }
  }

  func runCached(_ pipeline: Pipeline<ImageSource, EncodedImage>, _ url: String) async throws -> (EncodedImage, RecordingObserver)
  {
    let observer = RecordingObserver()
    let output = try await pipeline.run(ImageSource(url), options: RunOptions(observers: [observer])).value
    return (output, observer)
  }

  func stageKinds(_ observer: RecordingObserver) -> [String] {
    observer.events.compactMap { if case .stageStarted(let stage) = $0 { stage.kind } else { nil } }
  }

  func cacheOutcomes(_ observer: RecordingObserver) -> [String] {
    observer.events.compactMap { if case .cache(let event) = $0 { event.outcome.rawValue } else { nil } }
  }

  @Test("a stale entry with an ETag is revalidated: 304 reuses it without running the pipeline; a change re-runs it")
  func revalidationOnDisk() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/r.jpg": .conditional(body: image, contentType: "image/jpeg", etag: "v1", lastModified: nil, maxAge: 0)
    ])
    defer { Task { try? await server.shutdown() } }
    let directory = NSTemporaryDirectory() + "darkroom-revalidate-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let pipeline = thumbnail(store: try DiskStore(directory: directory))
    let url = server.url("/r.jpg")

    let (first, one) = try await runCached(pipeline, url)
    #expect(cacheOutcomes(one) == ["miss", "stored"])
    let (second, two) = try await runCached(pipeline, url)
    #expect(cacheOutcomes(two) == ["revalidated"])
    #expect(stageKinds(two) == ["fetch"])
    #expect(second.bytes == first.bytes)
    #expect(server.requestCount("/r.jpg") == 2)
    #expect(server.requests.last?.headers["if-none-match"] == "\"v1\"")

    server.setRoute(
      "/r.jpg", .conditional(body: try otherImage, contentType: "image/jpeg", etag: "v2", lastModified: nil, maxAge: 0))
    let (third, three) = try await runCached(pipeline, url)
    #expect(cacheOutcomes(three) == ["miss", "stored"])
    #expect(stageKinds(three).first == "fetch" && stageKinds(three).count > 1)
    #expect(third.bytes != first.bytes)
    #expect(server.requestCount("/r.jpg") == 3)
  }

  @Test("max-age decides freshness by the store's clock; Last-Modified alone also revalidates")
  func maxAgeAndLastModified() async throws {
    let modified = "Tue, 03 Nov 2026 10:00:00 GMT"
    let server = try await TestHTTPServer.start(routes: [
      "/m.jpg": .conditional(body: image, contentType: "image/jpeg", etag: nil, lastModified: modified, maxAge: 60)
    ])
    defer { Task { try? await server.shutdown() } }
    let clock = ManualClock(start: Date())
    let pipeline = thumbnail(store: MemoryStore(costLimit: 10 << 20, now: { clock.now }))
    let url = server.url("/m.jpg")
    _ = try await runCached(pipeline, url)
    clock.advance(30)
    #expect(cacheOutcomes(try await runCached(pipeline, url).1) == ["hit"])
    #expect(server.requestCount("/m.jpg") == 1)
    clock.advance(31)
    #expect(cacheOutcomes(try await runCached(pipeline, url).1) == ["revalidated"])
    #expect(server.requests.last?.headers["if-modified-since"] == modified)
    #expect(cacheOutcomes(try await runCached(pipeline, url).1) == ["hit"])  // the 304 gave it another 60 s
    #expect(server.requestCount("/m.jpg") == 2)
  }

  @Test("Expires is honoured; maxAge > 0 overrides no-store; without validators an expired entry is fetched again")
  func expiresAndOverrides() async throws {
    let future = HTTPDate.format(Date() + 600)
    let server = try await TestHTTPServer.start(routes: [
      "/expires.jpg": .headers(.ok(body: image, contentType: "image/jpeg"), [("Expires", future)]),
      "/nostore.jpg": .headers(.ok(body: image, contentType: "image/jpeg"), [("Cache-Control", "no-store")]),
    ])
    defer { Task { try? await server.shutdown() } }
    let clock = ManualClock(start: Date())
    let store = MemoryStore(costLimit: 10 << 20, now: { clock.now })
    let byHeaders = thumbnail(store: store)
    let overriding = thumbnail(store: store, maxAge: .seconds(60))
    for _ in 0..<3 {
      _ = try await runCached(byHeaders, server.url("/expires.jpg"))
      _ = try await runCached(overriding, server.url("/nostore.jpg"))
    }
    #expect(server.requestCount("/expires.jpg") == 1)
    #expect(server.requestCount("/nostore.jpg") == 1)
    clock.advance(61)
    let (_, observer) = try await runCached(overriding, server.url("/nostore.jpg"))
    #expect(cacheOutcomes(observer) == ["miss", "stored"])
    #expect(server.requestCount("/nostore.jpg") == 2)
  }
}
