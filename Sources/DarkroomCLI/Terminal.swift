import DarkroomCore
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Serialised writes to stdout and stderr that never stop the runner.
///
/// Lines are written with `write(2)`, not `FileHandle.write`, which traps when the write fails: a
/// closed stderr, a log on a full disk or a reader that went away (`| head`) loses the line, never
/// the batch. `SIGPIPE` is ignored (``ignoreBrokenPipes()``), so a closed pipe is an `EPIPE` error
/// here instead of a signal that ends the process. Control characters that come from outside (file
/// names, URLs, response headers inside error messages) are shown escaped, so they cannot move the
/// cursor, retitle the terminal or forge lines.
enum Terminal {
  /// Whether stdout has failed (a closed pipe, a full disk): later output to it is dropped. Its
  /// lock is held for every write, to stdout and stderr alike, so lines never interleave.
  private static let stdoutFailed = Protected(false)

  static func out(_ line: String) {
    stdoutFailed.withLock { failed in
      guard !failed else { return }
      if DescriptorIO.writeAll(1, Array((printable(line, keepingNewlines: true) + "\n").utf8)) != nil { failed = true }
    }
  }

  static func error(_ line: String, newline: Bool = true) {
    let text = printable(line, keepingNewlines: true) + (newline ? "\n" : "")
    stdoutFailed.withLock { _ in _ = DescriptorIO.writeAll(2, Array(text.utf8)) }
  }

  /// Rewrites the current stderr line (progress bars).
  static func status(_ line: String) {
    stdoutFailed.withLock { _ in _ = DescriptorIO.writeAll(2, Array(("\r\u{1B}[2K" + printable(line)).utf8)) }
  }

  static var stderrIsTerminal: Bool { isatty(2) == 1 }
  /// Whether a person may be typing on standard input (a question can be asked).
  static var stdinIsTerminal: Bool { isatty(0) == 1 }

  /// Opens `/dev/null` on any of descriptors 0, 1 and 2 that is closed (`<&-`, `2>&-`), so that no
  /// file the run opens later gets one of them: the stop signals' pipe became standard input and
  /// the list reader waited on it for ever, and an output opened as descriptor 2 would take the
  /// error messages. Called first thing.
  static func openClosedStandardStreams() {
    for descriptor in Int32(0)...2 where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
      let opened = open("/dev/null", O_RDWR)
      if opened >= 0, opened != descriptor { close(opened) }  // someone else's race: leave it
    }
  }

  /// The position (1 = the first after the program) of the first argument that is not valid
  /// UTF-8, read from the raw `argv`.
  static func firstArgumentNotUTF8() -> Int? {
    for index in 1..<Int(CommandLine.argc) {
      guard let raw = CommandLine.unsafeArgv[index] else { continue }
      if String(validatingCString: raw) == nil { return index }
    }
    return nil
  }

  /// Makes a write to a closed pipe fail with `EPIPE` instead of killing the process; called once
  /// at start.
  static func ignoreBrokenPipes() { signal(SIGPIPE, SIG_IGN) }

  /// `text` with every control character (C0, DEL, C1, the line and paragraph separators, the
  /// bidirectional overrides and the byte-order mark) shown as
  /// `\u{…}`; newlines and tabs stay when `keepingNewlines` is set (the runner's own multi-line
  /// messages; values from outside are passed through `printable` without it first).
  static func printable(_ text: String, keepingNewlines: Bool = false) -> String {
    var result = ""
    result.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
    for scalar in text.unicodeScalars {
      let value = scalar.value
      let control =
        value < 0x20 || (0x7F...0x9F).contains(value) || (0x2028...0x202E).contains(value)
        || (0x2066...0x2069).contains(value) || value == 0xFEFF
      if keepingNewlines, scalar == "\n" || scalar == "\t" {
        result.unicodeScalars.append(scalar)
      } else if control {
        result += "\\u{\(String(value, radix: 16))}"
      } else {
        result.unicodeScalars.append(scalar)
      }
    }
    return result
  }
}
