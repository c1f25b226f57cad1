// What the samples of the TaskKitTesting catalog use but do not declare.
import TaskKit
import TaskKitTesting
import Testing
