package driver

// Actors runs actors together and ends them together (the oklog run.Group
// pattern): when the first actor's execute returns, every actor's interrupt
// is called, and Run waits for all of them before returning the first
// error.
type Actors struct {
	actors []actor
}

type actor struct {
	execute   func() error
	interrupt func(error)
}

// Add adds an actor. interrupt must make execute return.
func (g *Actors) Add(execute func() error, interrupt func(error)) {
	g.actors = append(g.actors, actor{execute, interrupt})
}

// Run starts every actor and returns the error of the first to end (nil
// with no actors).
func (g *Actors) Run() error {
	if len(g.actors) == 0 {
		return nil
	}
	errs := make(chan error, len(g.actors))
	for _, a := range g.actors {
		go func(a actor) { errs <- a.execute() }(a)
	}
	err := <-errs
	for _, a := range g.actors {
		a.interrupt(err)
	}
	for i := 1; i < len(g.actors); i++ {
		<-errs
	}
	return err
}
