"""Times training steps with CUDA events, as benchmark scripts do."""
import torch

model = torch.nn.Linear(32, 32).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # MARK: events
for step in range(3):
    start.record()
    loss = model(torch.randn(16, 32, device="cuda")).square().mean()
    loss.backward()
    opt.step()
    end.record()
    torch.cuda.synchronize()
    print("elapsed_ms_positive", start.elapsed_time(end) > 0)
