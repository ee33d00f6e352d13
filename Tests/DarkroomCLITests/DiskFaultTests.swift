import DarkroomCore
import DarkroomHTTPTestServer
import Foundation
import Testing

/// Runs shell scripts in a private mount namespace (`unshare --mount`), where they can mount
/// small or read-only tmpfs file systems that vanish with them. Needs root or user namespaces;
/// the tests below are disabled, saying so, where neither is available.
enum MountNamespace {
  static let available: Bool = {
    guard let directory = try? Runner.temporaryDirectory() else { return false }
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let script = "mount -t tmpfs -o size=64k tmpfs \"$WORK\""
    let check = try? Runner.captureBlocking(
      executable: "/usr/bin/unshare", arguments: ["--mount", "--propagation", "private", "--", "/bin/sh", "-ec", script],
      environment: ["DARKROOM": Runner.executable, "WORK": directory])
    return check?.status == 0
  }()

  /// Runs `script` with `sh -e` in a new mount namespace, with `$DARKROOM` (the runner) and
  /// `$WORK` set, from the package folder.
  static func run(_ script: String, work: String) async throws -> Runner.Result {
    try await Runner.capture(
      executable: "/usr/bin/unshare", arguments: ["--mount", "--propagation", "private", "--", "/bin/sh", "-ec", script],
      environment: ["DARKROOM": Runner.executable, "WORK": work])
  }

  /// The JSON Lines a run wrote, parsed.
  static func events(_ path: String) throws -> [JSONValue] {
    try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map { try JSONParser.parse(String($0)) }
  }

  /// Every file under `directory`, relative, sorted.
  static func files(under directory: String) -> [String] {
    (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? [])
      .filter { path in
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: directory + "/" + path, isDirectory: &isDirectory)
          && !isDirectory.boolValue
      }
      .sorted()
  }
}

@Suite(
  "Disk faults: full and read-only file systems", .serialized, .timeLimit(.minutes(4)),
  .enabled(if: MountNamespace.available, "needs mount namespaces (root or user namespaces) to mount a small tmpfs"))
struct DiskFaultTests {
  /// fetch → decode → 400×400 PNG → disk cache in `directory` (PNG: large enough to fill 300 KB).
  static func cachedPipeline(cache directory: String, at path: String) throws {
    let text = """
      { "version": 1, "name": "full-disk",
        "stages": [
          { "stage": "fetch" }, { "stage": "decode" },
          { "stage": "resize", "width": 400, "height": 400, "mode": "fit" },
          { "stage": "encode", "format": "png" },
          { "stage": "cache", "store": "disk", "directory": "\(directory)", "maxAge": 86400 }
        ] }
      """
    try text.write(toFile: path, atomically: true, encoding: .utf8)
  }

  @Test("a disk cache on a full disk: stores fail with ENOSPC, every image still comes out, no partial file, hits are whole")
  func fullCacheDisk() async throws {
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    try FileManager.default.createDirectory(atPath: work + "/cache", withIntermediateDirectories: true)
    try Self.cachedPipeline(cache: work + "/cache/store", at: work + "/pipeline.json")
    let run = try await MountNamespace.run(
      """
      mount -t tmpfs -o size=300k tmpfs "$WORK/cache"
      "$DARKROOM" run "$WORK/pipeline.json" Examples/images --output "$WORK/first" --events jsonl > "$WORK/first.jsonl"
      "$DARKROOM" run "$WORK/pipeline.json" Examples/images --output "$WORK/second" --events jsonl > "$WORK/second.jsonl"
      find "$WORK/cache" -type f > "$WORK/cache-files.txt"
      """, work: work)
    #expect(run.status == 0, "\(run.stderr)")  // both runs exit 0: a cache that cannot store is not a failed image

    let first = try MountNamespace.events(work + "/first.jsonl")
    #expect(first.filter { $0["event"] == "finished" }.count == 4)
    let failedStores = first.filter { $0["outcome"] == "storeFailed" }
    #expect(!failedStores.isEmpty, "300 KB should not hold four 400-pixel PNGs")
    for event in failedStores {
      guard case .string(let detail)? = event["detail"] else {
        Issue.record("a storeFailed event without its detail: \(event)")
        continue
      }
      #expect(detail.contains("cacheFailed") && detail.contains("No space left on device"), "\(detail)")
      #expect(detail.contains("lower the store's maxBytes"))
    }
    let cacheFiles = try String(contentsOfFile: work + "/cache-files.txt", encoding: .utf8).split(separator: "\n")
    #expect(!cacheFiles.contains { $0.hasSuffix(".partial") }, "a write cut short by ENOSPC left \(cacheFiles)")

    // The second run is answered from the entries that were stored, byte for byte.
    let second = try MountNamespace.events(work + "/second.jsonl")
    let hits = second.filter { $0["outcome"] == "hit" }
    #expect(!hits.isEmpty && hits.count < 4)
    #expect(second.filter { $0["event"] == "finished" }.count == 4)
    for name in MountNamespace.files(under: work + "/first") {
      let original = try Data(contentsOf: URL(fileURLWithPath: work + "/first/" + name))
      let again = try Data(contentsOf: URL(fileURLWithPath: work + "/second/" + name))
      #expect(original == again, "\(name) differs when served from the cache")
    }
  }

  @Test("outputs on a full disk fail with writeFailed (ENOSPC) and leave only whole files")
  func fullOutputDisk() async throws {
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    try FileManager.default.createDirectory(atPath: work + "/full", withIntermediateDirectories: true)
    let reference = try await Runner.run([
      "run", "Examples/pipelines/bench-fill.json", "Examples/images", "--output", work + "/roomy",
    ])
    #expect(reference.status == 0, "\(reference.stderr)")
    let roomy = MountNamespace.files(under: work + "/roomy")
    let sizes = try roomy.map { try Data(contentsOf: URL(fileURLWithPath: work + "/roomy/" + $0)).count }
    // Room for the smallest output and some of the next, never all of them.
    let room = sizes.min()! + sizes.max()! / 2
    let run = try await MountNamespace.run(
      """
      mount -t tmpfs -o size=\(room) tmpfs "$WORK/full"
      status=0
      "$DARKROOM" run Examples/pipelines/bench-fill.json Examples/images --output "$WORK/full" || status=$?
      ls -A "$WORK/full" > "$WORK/full-files.txt"
      for f in "$WORK"/full/*; do cp "$f" "$WORK/kept-$(basename "$f")"; done
      exit $status
      """, work: work)
    #expect(run.status == 1, "\(run.stderr)")
    #expect(run.stderr.contains("writeFailed: cannot write"))
    #expect(run.stderr.contains("No space left on device"))
    for line in run.stderr.split(separator: "\n") where line.contains("writeFailed") {
      #expect(line.components(separatedBy: "cannot write").count == 2, "the file and its reason once: \(line)")
    }
    let kept = try String(contentsOfFile: work + "/full-files.txt", encoding: .utf8).split(separator: "\n").map(String.init)
    #expect(!kept.contains { $0.hasSuffix(".tmp") }, "temporary files left: \(kept)")
    #expect(kept.count < roomy.count)
    for name in kept {  // whatever was written is whole: identical to the run with room
      let written = try Data(contentsOf: URL(fileURLWithPath: work + "/kept-" + name))
      #expect(written == (try Data(contentsOf: URL(fileURLWithPath: work + "/roomy/" + name))), "\(name) is partial")
    }
  }

  @Test("a fetch-only run onto a full disk: bodies written as they arrive fail with writeFailed (ENOSPC), only whole files stay")
  func fullDiskWhileFetching() async throws {
    let photos = try ["Examples/images/dunes.jpg", "Examples/images/rings.png", "Examples/images/checker.webp"].map {
      try [UInt8](Data(contentsOf: Runner.package.appendingPathComponent($0)))
    }
    var routes: [String: TestResponse] = [:]
    for index in 0..<12 { routes["/\(index).img"] = .ok(body: photos[index % photos.count], contentType: "image/jpeg") }
    // Error pages larger than the disk: they never reach it, so their status (and the retry a 503
    // brings) is what the run reports.
    let page = [UInt8](repeating: 0x20, count: 3 << 20)
    routes["/missing.img"] = .status(404, body: page)
    routes["/busy.img"] = .sequence([.status(503, body: page), .ok(body: photos[2], contentType: "image/webp")])
    let server = try await TestHTTPServer.start(routes: routes)
    defer { Task { try? await server.shutdown() } }
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    try FileManager.default.createDirectory(atPath: work + "/full", withIntermediateDirectories: true)
    try Data(#"{"version": 1, "stages": [{"stage": "fetch", "allowHosts": ["127.0.0.1"], "retries": 1}]}"#.utf8).write(
      to: URL(fileURLWithPath: work + "/mirror.json"))
    let urls = (0..<12).map { server.url("/\($0).img") }.joined(separator: " ")
    let pages = [server.url("/missing.img"), server.url("/busy.img")].joined(separator: " ")
    // Room for a few of the bodies, never all twelve.
    let room = photos.map(\.count).reduce(0, +) + photos.map(\.count).min()!
    let run = try await MountNamespace.run(
      """
      mount -t tmpfs -o size=\(room) tmpfs "$WORK/full"
      "$DARKROOM" run "$WORK/mirror.json" \(pages) --output "$WORK/full" > "$WORK/pages.txt" 2>&1 || true
      status=0
      "$DARKROOM" run "$WORK/mirror.json" \(urls) --output "$WORK/full" --fetch-concurrency 4 || status=$?
      ls -A "$WORK/full" > "$WORK/full-files.txt"
      for f in "$WORK"/full/*; do cp "$f" "$WORK/kept-$(basename "$f")"; done
      exit $status
      """, work: work)
    #expect(run.status == 1, "\(run.stderr)")
    #expect(run.stderr.contains("writeFailed: cannot keep the body of http://127.0.0.1"), "\(run.stderr)")
    #expect(run.stderr.contains("No space left on device"), "\(run.stderr)")
    let pagesRun = try String(contentsOfFile: work + "/pages.txt", encoding: .utf8)
    #expect(pagesRun.contains("httpStatus: the server answered 404"), "\(pagesRun)")
    #expect(pagesRun.contains("done 1, failed 1"), "the retry after the 503 was saved: \(pagesRun)")
    let kept = try String(contentsOfFile: work + "/full-files.txt", encoding: .utf8).split(separator: "\n").map(String.init)
    #expect(kept.contains("busy.webp"), "the retry after the 503 was saved: \(kept)")
    #expect(kept.count > 1 && kept.count < 13, "\(kept)")
    #expect(!kept.contains { $0.hasSuffix(".tmp") }, "temporary files left: \(kept)")
    for name in kept {  // whatever was saved is whole: the body the server sent for it
      let index = name == "busy.webp" ? 2 : try #require(Int(name.split(separator: ".")[0]), "\(name)")
      let written = try [UInt8](Data(contentsOf: URL(fileURLWithPath: work + "/kept-" + name)))
      #expect(written == photos[index % photos.count], "\(name) is partial")
    }
  }

  @Test("a read-only cache directory is refused before anything runs; a read-only output directory fails each image")
  func readOnly() async throws {
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    try FileManager.default.createDirectory(atPath: work + "/cache", withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: work + "/out", withIntermediateDirectories: true)
    try Self.cachedPipeline(cache: work + "/cache/store", at: work + "/pipeline.json")
    let run = try await MountNamespace.run(
      """
      mount -t tmpfs -o size=4m tmpfs "$WORK/cache"
      "$DARKROOM" run "$WORK/pipeline.json" Examples/images --output "$WORK/first" --quiet
      (cd "$WORK/cache" && find . -type f -path '*/entries/*' -exec md5sum {} + | sort) > "$WORK/before.txt"
      mount -o remount,ro "$WORK/cache"
      status=0
      "$DARKROOM" run "$WORK/pipeline.json" Examples/images --output "$WORK/second" 2> "$WORK/cache-ro.txt" || status=$?
      echo "$status" > "$WORK/cache-ro.status"
      (cd "$WORK/cache" && find . -type f -path '*/entries/*' -exec md5sum {} + | sort) > "$WORK/after.txt"
      mount -t tmpfs -o size=1m,ro tmpfs "$WORK/out"
      status=0
      "$DARKROOM" run Examples/pipelines/thumbnail.json Examples/images --output "$WORK/out" 2> "$WORK/out-ro.txt" || status=$?
      echo "$status" > "$WORK/out-ro.status"
      """, work: work)
    #expect(run.status == 0, "\(run.stderr)")
    func text(_ name: String) throws -> String { try String(contentsOfFile: work + "/" + name, encoding: .utf8) }
    #expect(try text("cache-ro.status") == "2\n")
    #expect(try text("cache-ro.txt").contains("disk cache directory \(work)/cache/store is not writable"))
    #expect(!FileManager.default.fileExists(atPath: work + "/second"), "nothing ran")
    #expect(try text("before.txt") == (try text("after.txt")))
    #expect(try !text("before.txt").isEmpty)
    #expect(try text("out-ro.status") == "1\n")
    let outErrors = try text("out-ro.txt")
    #expect(outErrors.components(separatedBy: "writeFailed").count - 1 == 4, "\(outErrors)")
    #expect(outErrors.contains("Read-only file system"))
  }
}
