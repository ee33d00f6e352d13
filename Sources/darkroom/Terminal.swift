import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Serialised writes to stdout and stderr.
enum Terminal {
  private static let lock = Mutex(())

  static func out(_ line: String) {
    lock.withLock { _ in
      FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
  }

  static func error(_ line: String) {
    lock.withLock { _ in
      FileHandle.standardError.write(Data((line + "\n").utf8))
    }
  }

  /// Rewrites the current stderr line (progress bars).
  static func status(_ line: String) {
    lock.withLock { _ in
      FileHandle.standardError.write(Data(("\r\u{1B}[2K" + line).utf8))
    }
  }

  static var stderrIsTerminal: Bool { isatty(2) == 1 }
}
