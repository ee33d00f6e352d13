import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Serialised writes to stdout and stderr.
enum Terminal {
  private static let lock = NSLock()  // an NSLock: ThreadSanitizer sees through it

  static func out(_ line: String) {
    lock.withLock {
      FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
  }

  static func error(_ line: String) {
    lock.withLock {
      FileHandle.standardError.write(Data((line + "\n").utf8))
    }
  }

  /// Rewrites the current stderr line (progress bars).
  static func status(_ line: String) {
    lock.withLock {
      FileHandle.standardError.write(Data(("\r\u{1B}[2K" + line).utf8))
    }
  }

  static var stderrIsTerminal: Bool { isatty(2) == 1 }
}
