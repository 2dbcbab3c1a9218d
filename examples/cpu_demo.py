"""The main job on CPU: load gpushare in a real IPython shell, run %%share torch->tf and
%share … ->jax, and print the tables to the terminal."""

from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance(history_load_length=0)
shell.history_manager.enabled = False


def run(code: str, fails: bool = False) -> None:
    print(f"\n>>> {code.strip()}")
    result = shell.run_cell(code, store_history=False)
    if fails:
        assert result.error_in_exec is not None, "this cell was meant to be refused"
    else:
        result.raise_error()


run("%load_ext gpushare")
run("import torch, numpy as np, jax, tensorflow as tf")
run("""%%share torch->tf
x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
w = torch.randn(256, 256)
""")
run("x_tf[0, :2]")
run("%share x ->jax -r 5")
run("a = np.arange(10, dtype=np.float64)")
run("%share a numpy->torch->jax")  # JAX without x64 narrows float64: the last hop copies, and says why
run("r = a[::-1]")
run("%share r ->torch", fails=True)  # refused before torch can abort the process on negative strides
run("import gpushare; print(repr(gpushare.inspect(x)))")
print("\nThe bound names x_tf, w_tf, x_jax, a_torch and a_jax now live in the shell's namespace.")
