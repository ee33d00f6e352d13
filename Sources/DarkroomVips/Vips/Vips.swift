import CVips
import CVipsShim
import DarkroomCore
import Foundation

/// libvips set-up and error capture. libvips is opened (`dlopen`: nothing links it, so a process
/// that never touches pixels never pays for its hundred libraries) and initialised exactly once
/// per process, on first use, with untrusted loaders blocked and the operation cache off.
///
/// ```swift
/// try Vips.initialize()
/// print(Vips.version)   // "8.14.1"
/// ```
package enum Vips {
  private static let initialization: Result<Void, PipelineError> = {
    switch dr_init(CommandLine.arguments.first ?? "darkroom") {
    case 0: break
    case -1: return .failure(PipelineError(.processingFailed, "libvips failed to initialise", cause: captureError()))
    default:
      let reason = String(cString: dr_init_failure())
      return .failure(
        PipelineError(.libraryUnavailable, reason, cause: LibraryMessage(library: "libvips", text: reason)))
    }
    // One thread per image unless asked otherwise (``requestConcurrency(_:)``): Darkroom
    // parallelises across images, and with more threads libvips 8.14's JPEG loader detects
    // damaged data only some of the time (measured: a truncated JPEG passed strict decoding in
    // 41 % of runs with 2 threads, never with 1).
    let releasesPages = concurrency.withLock { state in
      state.started = true
      dr_concurrency_set(Int32(state.threads))
      return state.releasesPages
    }
    if releasesPages { ProgramPages.release() }
    return .success(())
  }()

  /// The threads asked for, whether libvips has started, and whether its start lets go of the
  /// program's start-up pages (set and read under the lock, so that a request and the start
  /// never undo each other).
  private static let concurrency = Protected((threads: 1, started: false, releasesPages: false))

  /// Lets go of the program's start-up pages (``ProgramPages/release()``) when libvips starts,
  /// or at once if it has: for a run whose image work begins with the first image that is not
  /// in a cache. A rerun whose images all come from a cache then never drops the code it is
  /// running (only to fault it back in, image after image), and a run that decodes keeps its
  /// peak memory as low as a release before the first image gives.
  package static func releaseProgramPagesAtStart() {
    let started = concurrency.withLock { state in
      state.releasesPages = true
      return state.started
    }
    if started { ProgramPages.release() }
  }

  /// Sets the threads libvips uses inside one image pipeline (`vips_concurrency_set`): at once
  /// when it has started, otherwise when it starts, without starting it (a run whose images all
  /// come from a cache never does). Darkroom runs one image per blocking-pool thread, so 1 (the
  /// default) is best for batches. Raising it can speed up single huge images but, on libvips
  /// 8.14, makes strict decoding of damaged JPEGs unreliable: some truncated files then decode
  /// without an error.
  public static func requestConcurrency(_ threads: Int) {
    concurrency.withLock { state in
      state.threads = min(max(1, threads), 1024)
      if state.started { dr_concurrency_set(Int32(state.threads)) }
    }
  }

  /// Initialises libvips if that has not happened yet. Safe to call from any thread, any number
  /// of times.
  public static func initialize() throws(PipelineError) {
    try initialization.get()
  }

  /// The libvips version string (opening libvips if needed), or `"unavailable"` when it cannot be
  /// opened.
  public static var version: String {
    guard (try? initialize()) != nil else { return "unavailable" }
    return String(cString: dr_version())
  }

  /// Takes the text of libvips' error buffer (and clears it). The buffer is process-wide; call
  /// this right at the failing call.
  static func captureError() -> LibraryMessage {
    var text = ""
    if let raw = dr_error_buffer_copy() {
      text = String(cString: raw).trimmingCharacters(in: .whitespacesAndNewlines)
      g_free(raw)
    }
    let warning = takeWarning()
    if text.isEmpty {
      text = warning ?? "libvips gave no details"
    } else if let warning, !text.contains(warning) {
      text += " (warnings: \(warning))"
    }
    return LibraryMessage(library: "libvips", text: text.replacingNewlines())
  }

  /// Takes the last libvips warning logged on this thread, if any (and forgets it).
  @discardableResult
  static func takeWarning() -> String? {
    var buffer = [CChar](repeating: 0, count: 512)
    let length = dr_take_warning(&buffer, buffer.count)
    guard length > 0 else { return nil }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// Whether a libvips message comes from a loader reading damaged pixel data.
  static func isLoaderFailure(_ message: LibraryMessage) -> Bool {
    let markers = [
      "VipsJpeg", "jpegload", "pngload", "spng", "libpng", "gifload", "webpload", "webp2vips", "tiff2vips", "tiffload",
      "heifload", "heif:", "read error", "Premature end", "Corrupt JPEG", "not enough data", "CRC error",
      "TIFFRead", "LZW", "Not enough data", "vipspng", "error in tile", "webp2vips", "DumpModeDecode", "TIFFFetch",
    ]
    return markers.contains { message.text.contains($0) }
  }

  /// Whether a libvips message names a saver as the failing part (rather than the pixels read).
  static func isSaverFailure(_ message: LibraryMessage) -> Bool {
    let markers = [
      "jpegsave", "pngsave", "spngsave", "webpsave", "heifsave", "gifsave", "cgif", "heif: Encod", "Encoder", "encoder",
    ]
    return markers.contains { message.text.contains($0) } && !isLoaderFailure(message)
  }
}

extension String {
  /// One line, repeated messages once.
  fileprivate func replacingNewlines() -> String {
    var seen = Set<String>()
    return split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
      .filter { !$0.isEmpty && seen.insert($0).inserted }.joined(separator: " | ")
  }
}
