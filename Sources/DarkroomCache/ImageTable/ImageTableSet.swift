import DarkroomCore
import Foundation

/// Several image table formats in one directory, found by name or by family (FastImageCache's
/// format families: the 64, 128 and 256 px avatars of the same people, say).
///
/// ```swift
/// let avatars = try ImageTableSet(directory: "/var/cache/tables", formats: [small, medium, large])
/// avatars.delete("user-42", inFamily: "avatars")   // every size of one user
/// ```
package final class ImageTableSet: Sendable {
  /// The tables, in the order their formats were given.
  public let tables: [ImageTable]

  /// Opens a table per format; format names must be distinct.
  public init(directory: String, formats: [ImageTableFormat], resetOnMismatch: Bool = false) throws {
    var seen: Set<String> = []
    for format in formats where !seen.insert(format.name).inserted {
      throw PipelineError(.invalidDefinition, "two image table formats are named \"\(format.name)\"; names must be distinct")
    }
    tables = try formats.map { try ImageTable(directory: directory, format: $0, resetOnMismatch: resetOnMismatch) }
  }

  /// The table of the format named `name`.
  public func table(named name: String) -> ImageTable? { tables.first { $0.format.name == name } }

  /// The tables of one family, smallest entries first.
  public func tables(inFamily family: String) -> [ImageTable] {
    tables.filter { $0.format.family == family }.sorted { $0.format.pixelBytes < $1.format.pixelBytes }
  }

  /// Whether any table of the family holds `entityID`.
  public func exists(_ entityID: String, inFamily family: String) -> Bool {
    tables(inFamily: family).contains { $0.exists(entityID) }
  }

  /// Removes `entityID` from every table of the family.
  public func delete(_ entityID: String, inFamily family: String) {
    for table in tables(inFamily: family) { table.delete(entityID) }
  }

  /// Empties every table.
  public func reset() {
    for table in tables { table.reset() }
  }
}
