import DarkroomCore
import Foundation
import Testing

@Suite("Notifier lifetime", .timeLimit(.minutes(3)))
struct NotifierLifetimeTests {
  @Test("a notifier let go without close() delivers what it holds, then closes its sinks")
  func letGoDelivers() async {
    let sink = StreamSink()
    let count = 200
    do {
      let notifier = Notifier(sinks: [sink])
      for index in 0..<count { notifier.post(LoadNotification(name: "n\(index)", pipeline: "lifetime")) }
    }
    // The stream ends only when the sink is closed: the notifier's own task does it once it has
    // delivered everything.
    var names: [String] = []
    for await notification in sink.notifications { names.append(notification.name) }
    #expect(names == (0..<count).map { "n\($0)" })
  }

  @Test("close() delivers, then closes the sinks; posts after it are dropped")
  func closeThenPost() async {
    let sink = StreamSink()
    let notifier = Notifier(sinks: [sink])
    notifier.post(LoadNotification(name: "before", pipeline: "lifetime"))
    await notifier.close()
    notifier.post(LoadNotification(name: "after", pipeline: "lifetime"))
    var names: [String] = []
    for await notification in sink.notifications { names.append(notification.name) }
    #expect(names == ["before"])
    #expect(notifier.statistics.allSatisfy { $0.statistics.posted == 1 && $0.statistics.delivered == 1 })
  }
}
