import Darkroom
import DarkroomHTTPTestServer
import DarkroomTesting
import DarkroomVipsTesting
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
      ImageDecoder()
      Resizer(width: 60)
      ImageEncoder(.png())
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

  @Test("a 304 naming another ETag does not revalidate the entry: the image is fetched again without conditions")
  func notModifiedWithAnotherETag() async throws {
    let changed = try otherImage
    let server = try await TestHTTPServer.start(routes: [
      "/e.jpg": .sequence([
        .conditional(body: image, contentType: "image/jpeg", etag: "v1", lastModified: nil, maxAge: 0),
        .status(304, headers: [("ETag", "\"v2\""), ("Cache-Control", "max-age=0")]),
        .ok(body: changed, contentType: "image/jpeg", headers: [("ETag", "\"v2\""), ("Cache-Control", "max-age=0")]),
      ])
    ])
    defer { Task { try? await server.shutdown() } }
    let pipeline = thumbnail(store: MemoryStore(costLimit: 10 << 20))
    let url = server.url("/e.jpg")
    let (first, _) = try await runCached(pipeline, url)
    let (second, two) = try await runCached(pipeline, url)
    #expect(cacheOutcomes(two) == ["miss", "stored"])
    #expect(second.bytes != first.bytes)
    #expect(server.requestCount("/e.jpg") == 3)
    #expect(server.requests.last?.headers["if-none-match"] == nil)
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

/// Cache identity over HTTP: no caller is served another caller's image.
extension HTTPTransportTests {
  func fetcher(headers: [String: String]) -> Fetcher {
    var http = HTTPOptions()
    http.allowHosts = ["127.0.0.1"]
    http.headers = headers
    return Fetcher(transports: [HTTPTransport(options: http)])
  }

  func privateImages(cacheControl: String? = nil, vary: String? = nil) throws -> TestResponse {
    var extra: [(String, String)] = []
    if let cacheControl { extra.append(("Cache-Control", cacheControl)) }
    if let vary { extra.append(("Vary", vary)) }
    return .byRequestHeader(
      "authorization",
      choices: [
        "Bearer alice": .headers(.ok(body: image, contentType: "image/jpeg"), extra),
        "Bearer bob": .headers(.ok(body: try otherImage, contentType: "image/jpeg"), extra),
      ], otherwise: .status(401))
  }

  @Test("pipelines or sources that differ only in a request header's value never share a cached or in-flight value")
  func headerValuesSeparateEntries() async throws {
    let server = try await TestHTTPServer.start(routes: ["/me.jpg": try privateImages(cacheControl: "max-age=600")])
    defer { Task { try? await server.shutdown() } }
    let url = server.url("/me.jpg")
    let other = ImageBytes(try otherImage)
    for store in [MemoryStore(costLimit: 10 << 20) as any CacheStore, try DiskStore(directory: temporaryFolder())] {
      // The header in the pipeline's fetch stage (a JSON "headers" option).
      func pipeline(_ user: String) -> Pipeline<ImageSource, FetchedData> {
        let fetch = fetcher(headers: ["Authorization": "Bearer \(user)"])
        return Pipeline(name: "private") {
          fetch
          Cache<FetchedData>(store: store, maxAge: .seconds(600))
        }
      }
      let alice = try await pipeline("alice").process(ImageSource(url))
      let bob = try await pipeline("bob").process(ImageSource(url))
      #expect(alice.bytes == ImageBytes(image) && bob.bytes == other, "\(store.name)")
      // The header on the source (Swift's ImageSource headers).
      let plain = Pipeline(name: "private-source") {
        revalidatingFetcher()
        Cache<FetchedData>(store: store, maxAge: .seconds(600))
      }
      let a = try await plain.process(ImageSource(url, headers: ["Authorization": "Bearer alice"]))
      let b = try await plain.process(ImageSource(url, headers: ["Authorization": "Bearer bob"]))
      #expect(a.bytes == ImageBytes(image) && b.bytes == other, "\(store.name)")
      // The cached values are found again by the same caller (and only by it).
      let again = try await pipeline("alice").process(ImageSource(url))
      #expect(again.bytes == ImageBytes(image))
    }
    // In flight: two callers at once through one loader share no transfer.
    let loader = ImageLoader(configuration: ImageLoader.Configuration())
    let shared = Pipeline(name: "inflight") { revalidatingFetcher() }
    async let first = loader.load(ImageSource(url, headers: ["Authorization": "Bearer alice"]), pipeline: shared).value
    async let second = loader.load(ImageSource(url, headers: ["Authorization": "Bearer bob"]), pipeline: shared).value
    let (x, y) = try await (first, second)
    #expect(x.bytes == ImageBytes(image) && y.bytes == other)
  }

  @Test("a private response, or one that varies on everything, is never stored, whatever the cache's maxAge")
  func privateResponsesAreNotStored() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/private.jpg": try privateImages(cacheControl: "private, max-age=600"),
      "/vary.jpg": try privateImages(vary: "*"),
      "/shared.jpg": try privateImages(cacheControl: "public, max-age=600", vary: "Accept-Encoding"),
    ])
    defer { Task { try? await server.shutdown() } }
    let store = MemoryStore(costLimit: 10 << 20)
    let fetch = fetcher(headers: ["Authorization": "Bearer alice"])
    let pipeline = Pipeline(name: "never-stored") {
      fetch
      Cache<FetchedData>(store: store, maxAge: .seconds(600))
    }
    for path in ["/private.jpg", "/vary.jpg", "/shared.jpg"] {
      for _ in 0..<2 {
        let observer = RecordingObserver()
        _ = try await pipeline.run(ImageSource(server.url(path)), options: RunOptions(observers: [observer])).value
        let outcomes = cacheOutcomes(observer)
        if path == "/shared.jpg" {
          #expect(outcomes == ["miss", "stored"] || outcomes == ["hit"], "\(path): \(outcomes)")
        } else {
          #expect(outcomes == ["miss", "storeFailed"], "\(path): \(outcomes)")
        }
      }
    }
    #expect(server.requestCount("/private.jpg") == 2 && server.requestCount("/vary.jpg") == 2)
    #expect(server.requestCount("/shared.jpg") == 1)
  }

  func temporaryFolder() -> String { NSTemporaryDirectory() + "darkroom-identity-\(UUID().uuidString)" }
}
