"""What the consumers do: priority processing, the leveling worker, the table sink, ordered groups."""
