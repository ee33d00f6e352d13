import Foundation
import Testing

/// Debian's `chromium` in headless mode: the DOM of a page after its scripts ran, and screenshots.
/// `make test` installs it (scripts/install-deps.sh); a test that needs it fails when it is missing.
enum HeadlessChromium {
  struct Missing: Error, CustomStringConvertible {
    var description: String { "chromium is not installed: run scripts/install-deps.sh (apt-get install chromium)" }
  }

  static func executable() throws -> String {
    for folder in ["/usr/bin", "/usr/local/bin", "/snap/bin"]
    where FileManager.default.isExecutableFile(atPath: folder + "/chromium") {
      return folder + "/chromium"
    }
    throw Missing()
  }

  /// Runs chromium on `page` with `arguments`, in a profile folder of its own.
  static func run(_ page: String, _ arguments: [String]) async throws -> Runner.Result {
    let profile = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: profile) }
    return try await Runner.capture(
      executable: try executable(),
      arguments: [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--user-data-dir=\(profile)",
        "--virtual-time-budget=5000",
      ] + arguments + [URL(fileURLWithPath: page).absoluteString])
  }

  /// The page's DOM after its scripts ran.
  static func dom(_ page: String) async throws -> String {
    let result = try await run(page, ["--dump-dom"])
    guard result.status == 0, !result.stdout.isEmpty else {
      throw ChromiumFailed(status: result.status, stderr: result.stderr)
    }
    return result.stdout
  }

  /// A screenshot of the page, `width`×`height`, as PNG bytes.
  static func screenshot(_ page: String, width: Int, height: Int) async throws -> Data {
    let folder = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let file = folder + "/shot.png"
    let result = try await run(page, ["--screenshot=\(file)", "--window-size=\(width),\(height)", "--hide-scrollbars"])
    guard let data = FileManager.default.contents(atPath: file) else {
      throw ChromiumFailed(status: result.status, stderr: result.stderr)
    }
    return data
  }

  struct ChromiumFailed: Error, CustomStringConvertible {
    var status: Int32
    var stderr: String
    var description: String { "chromium exited \(status): \(stderr.suffix(2_000))" }
  }

  /// The width and height in a PNG's header (signature, then the IHDR chunk), or `nil`.
  static func pngSize(_ data: Data) -> (width: Int, height: Int)? {
    let bytes = [UInt8](data.prefix(24))
    guard bytes.count == 24, bytes[0..<8] == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A],
      bytes[12..<16] == [0x49, 0x48, 0x44, 0x52]
    else { return nil }
    func word(_ at: Int) -> Int { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
    return (word(16), word(20))
  }

  /// How many times `needle` occurs in `text`.
  static func count(_ needle: String, in text: String) -> Int { text.components(separatedBy: needle).count - 1 }
}
